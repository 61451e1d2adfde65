#!/usr/bin/env node
'use strict'
// Packs what npm would publish: each platform package (npm/<platform> with
// the built binary copied in) and the main package, whose manifest gains an
// optionalDependency on each platform package (so npm installs the one that
// fits), as tarballs in the folder given (default: ./pack). The checkout's own
// package.json has none: those packages are not on the registry while
// developing, and `npm ci` would want them in the lockfile. Prints the
// tarballs' paths as JSON. Build first (`npm run build`; scripts/setup.js
// does it when the binary is missing).

const { spawnSync } = require('node:child_process')
const { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join, resolve } = require('node:path')

const root = join(__dirname, '..')
const out = resolve(process.argv[2] ?? join(root, 'pack'))
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/** Copies `from` (or the files listed) into a fresh folder, calls `fill` on it, packs it. */
function packStaged(name, fill) {
  const staging = mkdtempSync(join(tmpdir(), `keel-${name}-`))
  try {
    fill(staging)
    return pack(staging)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

function pack(dir) {
  const r = spawnSync(npm, ['pack', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`npm pack in ${dir} failed:\n${r.stderr}`)
  return join(out, JSON.parse(r.stdout)[0].filename)
}

mkdirSync(out, { recursive: true })
const platforms = readdirSync(join(root, 'npm'))
const tarballs = { platforms: {}, main: null }
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
for (const platform of platforms) {
  const binary = join(root, `keel.${platform}.node`)
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`npm run build\` on ${platform} first`)
  tarballs.platforms[platform] = packStaged(platform, (staging) => {
    cpSync(join(root, 'npm', platform), staging, { recursive: true })
    cpSync(binary, join(staging, `keel.${platform}.node`))
  })
}
tarballs.main = packStaged('main', (staging) => {
  // What `files` names, copied whole by its first path part (`lib/*.js`: lib/);
  // npm pack then keeps only what the patterns match.
  const tops = new Set([...manifest.files, 'README.md'].map((entry) => entry.split('/')[0]))
  for (const top of tops) cpSync(join(root, top), join(staging, top), { recursive: true })
  const optionalDependencies = Object.fromEntries(
    platforms.map((platform) => [`${manifest.name}-${platform}`, manifest.version]),
  )
  writeFileSync(join(staging, 'package.json'), `${JSON.stringify({ ...manifest, optionalDependencies }, null, 2)}\n`)
})
console.log(JSON.stringify(tarballs, null, 2))
