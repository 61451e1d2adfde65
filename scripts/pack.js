#!/usr/bin/env node
'use strict'
// `node scripts/pack.js [dir]`: the tarballs npm would publish, in the folder
// given (default: ./pack); prints their paths as JSON.
//
// - One platform package for each platform of package.json's napi.targets whose
//   binary is built here (keel.<platform>.node in the checkout: `npm run build`,
//   with `-- --target <triple>` for another platform, or the binary taken from
//   the GitHub workflow's artifacts); the others are listed as `missing`.
// - The main package, whose manifest gains an optionalDependency on every
//   declared platform package at its version, so npm installs the one that
//   fits and skips the rest. The checkout's own package.json has none: those
//   packages are not on the registry while developing, and `npm ci` would want
//   them in the lockfile.
// Every package gets the LICENSE, and its README's links are made absolute
// (to the repository on GitHub), so they resolve from the registry's page.

const { spawnSync } = require('node:child_process')
const { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join, posix, resolve } = require('node:path')
const { declaredPlatforms } = require('../lib/platforms.js')

const root = join(__dirname, '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
/** Where a README's relative links point once the README is on the registry. */
const REPOSITORY = 'https://github.com/shaferllc/keel/blob/main/'

/**
 * The README at `from` (a path in the checkout) with each relative link made
 * absolute: to the file on GitHub; a link to a heading of the same README stays.
 *
 * @param {string} from
 */
function readmeForRegistry(from) {
  const base = posix.dirname(from)
  return readFileSync(join(root, from), 'utf8').replace(/\]\((?!#|[a-z]+:)([^)\s]+)\)/g, (_, link) => {
    return `](${REPOSITORY}${posix.normalize(posix.join(base, link))})`
  })
}

/**
 * Fills a fresh folder with `fill` and packs it into `out`.
 *
 * @param {string} out
 * @param {string} name
 * @param {(staging: string) => void} fill
 */
function packStaged(out, name, fill) {
  const staging = mkdtempSync(join(tmpdir(), `keel-${name}-`))
  try {
    fill(staging)
    cpSync(join(root, 'LICENSE'), join(staging, 'LICENSE'))
    const r = spawnSync(npm, ['pack', '--json', '--pack-destination', out], { cwd: staging, encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`npm pack of ${name} failed:\n${r.stderr}`)
    return join(out, JSON.parse(r.stdout)[0].filename)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

/**
 * Packs every package there is a binary for, and the main package, into `out`.
 *
 * @param {string} out
 * @returns {{ platforms: Record<string, string>, main: string, missing: string[] }}
 */
function packAll(out) {
  mkdirSync(out, { recursive: true })
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
  /** @type {Record<string, string>} */
  const platforms = {}
  /** @type {string[]} */
  const missing = []
  for (const { name } of declaredPlatforms()) {
    const binary = join(root, `keel.${name}.node`)
    if (!existsSync(binary)) {
      missing.push(name)
      continue
    }
    platforms[name] = packStaged(out, name, (staging) => {
      cpSync(join(root, 'npm', name, 'package.json'), join(staging, 'package.json'))
      writeFileSync(join(staging, 'README.md'), readmeForRegistry(`npm/${name}/README.md`))
      cpSync(binary, join(staging, `keel.${name}.node`))
    })
  }
  const main = packStaged(out, 'main', (staging) => {
    // What `files` names, copied whole by its first path part (`lib/**/*.js`: lib/);
    // npm pack then keeps only what the patterns match.
    for (const top of new Set(manifest.files.map((/** @type {string} */ entry) => entry.split('/')[0]))) {
      cpSync(join(root, top), join(staging, top), { recursive: true })
    }
    writeFileSync(join(staging, 'README.md'), readmeForRegistry('README.md'))
    const optionalDependencies = Object.fromEntries(
      declaredPlatforms().map(({ name }) => [`${manifest.name}-${name}`, manifest.version]),
    )
    writeFileSync(join(staging, 'package.json'), `${JSON.stringify({ ...manifest, optionalDependencies }, null, 2)}\n`)
  })
  return { platforms, main, missing }
}

module.exports = { packAll, readmeForRegistry }

if (require.main === module) {
  const packed = packAll(resolve(process.argv[2] ?? join(root, 'pack')))
  if (Object.keys(packed.platforms).length === 0) {
    console.error('pack: no platform has a binary here: run `npm run build` (scripts/setup.js does it) first')
    process.exit(1)
  }
  console.log(JSON.stringify(packed, null, 2))
}
