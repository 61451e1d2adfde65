'use strict'
/**
 * The platforms a binary is built for, named as napi-rs names them: the Rust
 * target triples of package.json's `napi.targets`, each with the npm
 * platform package that carries its binary (`linux-x64-gnu`, `darwin-arm64`,
 * `win32-x64-msvc`, ...) and the `os`, `cpu` and `libc` npm matches it by.
 * The loader asks which one this process is; scripts/ packs and publishes
 * from the same list, so the two cannot disagree.
 */

/** @type {Record<string, string>} Rust's CPU names, as Node's `process.arch` says them. */
const CPU = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32', armv7: 'arm' }
/** @type {Record<string, string>} Rust's OS names, as Node's `process.platform` says them. */
const OS = { linux: 'linux', darwin: 'darwin', windows: 'win32' }

/**
 * @typedef {object} Platform
 * @property {string} target the Rust target triple (`aarch64-unknown-linux-musl`)
 * @property {string} name the platform part of the binary's and the package's names (`linux-arm64-musl`)
 * @property {string} os as `process.platform` says it
 * @property {string} cpu as `process.arch` says it
 * @property {'glibc' | 'musl' | undefined} libc Linux only: the C library the binary links
 */

/**
 * @param {string} target a Rust target triple of `napi.targets`
 * @returns {Platform}
 */
function platformOf(target) {
  const [cpu, , system, abi] = target.split('-')
  const os = OS[system] ?? system
  const arch = CPU[cpu] ?? cpu
  const name = [os, arch, abi].filter(Boolean).join('-')
  /** @type {Platform['libc']} */
  const libc = os !== 'linux' ? undefined : abi?.startsWith('musl') ? 'musl' : 'glibc'
  return { target, name, os, cpu: arch, libc }
}

/** @returns {Platform[]} every platform package.json declares a binary for */
function declaredPlatforms() {
  /** @type {string[]} */
  const targets = require('../package.json').napi?.targets ?? []
  return targets.map(platformOf)
}

/**
 * This process's platform, named as its binary is. On Linux the C library
 * decides between two binaries: Node built against glibc reports the glibc
 * it runs on; one built against musl (Alpine) reports none.
 *
 * @returns {string}
 */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const report = /** @type {any} */ (process.report?.getReport?.())
    const libc = report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'
    return `linux-${arch}-${arch === 'arm' ? `${libc}eabihf` : libc}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

module.exports = { platformOf, declaredPlatforms, hostPlatform }
