'use strict'
/**
 * The native addon, as the rest of lib/ calls it: the platform binary (a
 * local build first, then the per-platform package npm installed beside this
 * one, else an error that says which package to get), wrapped when this file
 * runs in another realm than the one that loaded the binary.
 *
 * Every function is typed in lib/native.d.ts, which napi-rs generates from
 * src/napi/ when the addon is built: `npm test` type-checks lib/
 * against it, so a changed Rust signature fails there, not in a user's call.
 */

const { existsSync } = require('node:fs')
const { join } = require('node:path')
const { types: { isPromise, isNativeError } } = require('node:util')

/** The platform as napi-rs names its binaries: linux-x64-gnu, darwin-arm64, ... */
function platformTriple() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const report = /** @type {any} */ (process.report?.getReport?.())
    const glibc = report?.header?.glibcVersionRuntime
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** The platforms a binary package is built for, from package.json's napi.targets (Rust triples). */
function publishedPlatforms() {
  /** @type {Record<string, string>} */
  const arch = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32', armv7: 'arm' }
  /** @type {Record<string, string>} */
  const os = { linux: 'linux', darwin: 'darwin', windows: 'win32' }
  /** @type {string[]} */
  const targets = require('../package.json').napi?.targets ?? []
  return targets.map((target) => {
    const [cpu, , system, abi] = target.split('-')
    return [os[system] ?? system, arch[cpu] ?? cpu, abi?.replace(/eabihf$/, '')].filter(Boolean).join('-')
  })
}

/**
 * What to run when the platform package is missing: the install commands of
 * the README (neither package is on the npm registry).
 *
 * @param {string} pkg the platform package's name
 */
function installHint(pkg) {
  const { name, version } = require('../package.json')
  const tarball = (/** @type {string} */ n) => `"$KEEL/pack/${n.replace(/^@/, '').replace('/', '-')}-${version}.tgz"`
  return (
    `It comes in a second package, ${pkg}, which is not on the npm registry. Install the ` +
    'checkout of the repository where the addon was built (`npm run demo` or `npm run build` ' +
    'there; KEEL=<that folder>), which holds both:\n' +
    '  npm install "$KEEL"\n' +
    "or both tarballs its scripts/pack.js makes, in one command:\n" +
    '  node "$KEEL/scripts/pack.js" "$KEEL/pack"\n' +
    `  npm install ${tarball(name)} ${tarball(pkg)}\n` +
    'If you did install both, the platform package was left out: --omit=optional, or a lockfile ' +
    'made on another platform.'
  )
}

/** @returns {import('./native')} */
function load() {
  const triple = platformTriple()
  const local = join(__dirname, '..', `keel.${triple}.node`)
  if (existsSync(local)) return require(local)
  const pkg = `@shaferllc/keel-${triple}`
  try {
    return require(pkg)
  } catch (cause) {
    if (/** @type {any} */ (cause)?.code !== 'MODULE_NOT_FOUND' || !String(/** @type {any} */ (cause).message).includes(pkg)) {
      throw cause
    }
    const built = publishedPlatforms()
    const hint = built.includes(triple)
      ? installHint(pkg)
      : `Binaries are built for ${built.join(', ')} only; ` +
        'elsewhere, build the addon from a checkout of the repository (needs Rust).'
    throw new Error(`@shaferllc/keel has no native binary for this platform (${triple}). ${hint}`, { cause })
  }
}

/**
 * The addon makes its objects and errors in the realm that loaded it first.
 * When this file runs in another one (Jest evaluates modules in a `vm`
 * context per test file), an error from the addon would fail `instanceof
 * TypeError` there. Only then are the addon's functions wrapped, so that its
 * errors and promises are this realm's; in a plain process nothing changes.
 *
 * @param {import('./native')} binding
 * @returns {import('./native')}
 */
function inThisRealm(binding) {
  if (Object.getPrototypeOf(binding.limits()) === Object.prototype) return binding
  /** @param {unknown} error */
  const own = (error) => {
    if (error instanceof Error || !isNativeError(error)) return error
    /** @type {ErrorConstructor} */
    const Class = { TypeError, RangeError }[/** @type {Error} */ (error).name] ?? Error
    const copy = new Class(/** @type {Error} */ (error).message)
    Object.assign(copy, error)
    Object.defineProperty(copy, 'stack', { value: /** @type {Error} */ (error).stack, writable: true, configurable: true })
    return copy
  }
  /** @param {unknown} error */
  const rethrow = (error) => {
    throw own(error)
  }
  /** @type {Record<string, unknown>} */
  const wrapped = {}
  for (const [name, fn] of Object.entries(binding)) {
    wrapped[name] =
      typeof fn !== 'function'
        ? fn
        : (/** @type {unknown[]} */ ...args) => {
            let result
            try {
              result = fn(...args)
            } catch (error) {
              throw own(error)
            }
            return isPromise(result) ? Promise.resolve(result).catch(rethrow) : result
          }
  }
  return /** @type {import('./native')} */ (/** @type {unknown} */ (wrapped))
}

module.exports = inThisRealm(load())
