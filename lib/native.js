'use strict'
/**
 * The native addon, as the rest of lib/ calls it: the platform binary (a
 * local build first, then the per-platform package npm installed beside this
 * one, else an error that says what to do), wrapped when this file runs in
 * another realm than the one that loaded the binary.
 *
 * Every function is typed in lib/native.d.ts, which napi-rs generates from
 * src/napi/ when the addon is built: `npm test` type-checks lib/
 * against it, so a changed Rust signature fails there, not in a user's call.
 */

const { existsSync } = require('node:fs')
const { join } = require('node:path')
const { types: { isPromise, isNativeError } } = require('node:util')
const { declaredPlatforms, hostPlatform } = require('./platforms.js')

/**
 * Where else the addon comes from: a checkout of the repository, built there
 * (the README's Install, whose commands the error gives as written).
 *
 * @param {string} pkg the platform package's name
 */
function fromACheckout(pkg) {
  const { name, version } = require('../package.json')
  const tarball = (/** @type {string} */ n) => `"$KEEL/pack/${n.replace(/^@/, '').replace('/', '-')}-${version}.tgz"`
  return (
    'Or install a checkout of the repository where the addon was built (`npm run demo` or ' +
    '`npm run build` there; KEEL=<that folder>):\n' +
    '  npm install "$KEEL"\n' +
    'or both tarballs its scripts/pack.js makes, in one command:\n' +
    '  node "$KEEL/scripts/pack.js" "$KEEL/pack"\n' +
    `  npm install ${tarball(name)} ${tarball(pkg)}\n`
  )
}

/** @returns {import('./native')} */
function load() {
  const platform = hostPlatform()
  const local = join(__dirname, '..', `keel.${platform}.node`)
  if (existsSync(local)) return require(local)
  const pkg = `@shaferllc/keel-${platform}`
  try {
    return require(pkg)
  } catch (cause) {
    const error = /** @type {any} */ (cause)
    if (error?.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes(pkg)) {
      // There, but not loadable here (another C library, an older glibc than it needs, ...).
      throw new Error(`@shaferllc/keel could not load its binary for this platform (${platform}, from ${pkg}): ${error?.message}`, { cause })
    }
    const built = declaredPlatforms().map((p) => p.name)
    const hint = built.includes(platform)
      ? `npm installs it with @shaferllc/keel, as the optional dependency ${pkg}, and it is not ` +
        'here: it was left out by --omit=optional, or by a lockfile made on another platform ' +
        '(remove node_modules and package-lock.json, then npm install again). ' +
        fromACheckout(pkg)
      : `Binaries are built for ${built.join(', ')} only; elsewhere, build the addon from a ` +
        'checkout of the repository (it needs Rust: https://rustup.rs) and install that checkout:\n' +
        '  git clone https://github.com/shaferllc/keel.git && cd keel && npm run demo   (builds it, then runs a demo)\n' +
        '  npm install <that folder>   (in your project)\n'
    throw new Error(`@shaferllc/keel has no native binary for this platform (${platform}). ${hint}`, { cause })
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
