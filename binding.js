'use strict'
// Loads the compiled addon: a local build first (`npm run build` writes
// keel.<platform>.node here), then the per-platform package npm installed
// beside this one. When neither exists the error says which package to get.

const { existsSync } = require('node:fs')
const { join } = require('node:path')

function platformTriple() {
  const { platform, arch } = process
  if (platform === 'linux') {
    const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
    const glibc = report?.header?.glibcVersionRuntime
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
  }
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** The platforms a binary package is built for, from package.json's napi.targets (Rust triples). */
function publishedPlatforms() {
  const arch = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32', armv7: 'arm' }
  return (require('./package.json').napi?.targets ?? []).map((target) => {
    const [cpu, , os, abi] = target.split('-')
    const platform = { linux: 'linux', darwin: 'darwin', windows: 'win32' }[os] ?? os
    return [platform, arch[cpu] ?? cpu, abi?.replace(/eabihf$/, '')].filter(Boolean).join('-')
  })
}

function load() {
  const triple = platformTriple()
  const local = join(__dirname, `keel.${triple}.node`)
  if (existsSync(local)) return require(local)
  const pkg = `@shaferllc/keel-${triple}`
  try {
    return require(pkg)
  } catch (cause) {
    if (cause?.code !== 'MODULE_NOT_FOUND' || !String(cause.message).includes(pkg)) throw cause
    const built = publishedPlatforms()
    const hint = built.includes(triple)
      ? `It comes in the package ${pkg}, an optional dependency that npm installs on ${triple} ` +
        `unless optional dependencies were left out (--omit=optional, or a lockfile made on another ` +
        `platform). Install it: npm install ${pkg}`
      : `Binaries are published for ${built.join(', ')} only; ` +
        'elsewhere, build the addon from a checkout of the repository (needs Rust).'
    throw new Error(`@shaferllc/keel has no native binary for this platform (${triple}). ${hint}`, { cause })
  }
}

module.exports = load()
