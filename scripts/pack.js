#!/usr/bin/env node
'use strict'
// Packs what npm would publish: the platform package (npm/linux-x64-gnu with
// the built binary copied in) and the main package, as tarballs in the folder
// given (default: ./pack). Prints their paths as JSON. Build first
// (`npm run build`; scripts/setup.js does it when the binary is missing).

const { spawnSync } = require('node:child_process')
const { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join, resolve } = require('node:path')

const root = join(__dirname, '..')
const out = resolve(process.argv[2] ?? join(root, 'pack'))
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function pack(dir) {
  const r = spawnSync(npm, ['pack', '--json', '--pack-destination', out], { cwd: dir, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`npm pack in ${dir} failed:\n${r.stderr}`)
  return join(out, JSON.parse(r.stdout)[0].filename)
}

mkdirSync(out, { recursive: true })
const platforms = readdirSync(join(root, 'npm'))
const tarballs = { platforms: {}, main: null }
for (const platform of platforms) {
  const binary = join(root, `keel.${platform}.node`)
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`npm run build\` on ${platform} first`)
  const staging = mkdtempSync(join(tmpdir(), `keel-${platform}-`))
  try {
    cpSync(join(root, 'npm', platform), staging, { recursive: true })
    cpSync(binary, join(staging, `keel.${platform}.node`))
    tarballs.platforms[platform] = pack(staging)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}
tarballs.main = pack(root)
console.log(JSON.stringify(tarballs, null, 2))
