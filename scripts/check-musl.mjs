#!/usr/bin/env node
// `npm run check:musl`: the addon built for the musl targets (Alpine) through
// zig, then checked for what it links and, on x64, loaded by musl itself:
//
// - each binary needs no shared library but musl's libc.so, and no symbol
//   of glibc's (no `GLIBC_` version);
// - x86_64: a small C program built with musl-gcc (Debian musl-tools) loads it
//   with dlopen(RTLD_NOW) through musl's own dynamic loader and finds its
//   napi_register_module_v1. The program supplies Node's napi_* and uv_*
//   functions as stubs (a musl Node is not available here), so every other
//   symbol is resolved by musl and the binary's constructors run; a glibc
//   build fails the same load (it needs libgcc_s, glibc's).
//
// Without zig, cargo-zigbuild, the Rust targets or musl-gcc it says what is
// missing and how to install it, and skips (a failure under CI=true or
// KEEL_TEST_REQUIRE_ALL=1).

import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { missingToCross, stopIfMissing, which } from '../support/tools.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const TARGETS = { 'x86_64-unknown-linux-musl': 'linux-x64-musl', 'aarch64-unknown-linux-musl': 'linux-arm64-musl' }
stopIfMissing(
  'check:musl',
  missingToCross(Object.keys(TARGETS), [
    ['musl-gcc', () => which('musl-gcc'), 'apt-get install musl-tools'],
    ['readelf', () => which('readelf'), 'apt-get install binutils'],
  ]),
)

const problems = []
const output = (cmd, args) => {
  const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 })
  if (r.status !== 0) problems.push(`${cmd} ${args.join(' ')}: ${r.stderr || r.error?.message}`)
  return r.stdout ?? ''
}

for (const [target, platform] of Object.entries(TARGETS)) {
  console.error(`check:musl: building the addon for ${target} (zig; cargo skips what is up to date)`)
  const built = spawnSync('npm', ['run', '--silent', 'build', '--', '--target', target], { cwd: root, stdio: 'inherit' })
  if (built.status !== 0) {
    console.error(`check:musl: the build for ${target} failed`)
    process.exit(1)
  }
  const binary = join(root, `keel.${platform}.node`)
  const needed = [...output('readelf', ['-d', binary]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1])
  if (needed.join() !== 'libc.so') problems.push(`${platform} needs ${needed.join(', ')}, not musl's libc.so alone`)
  const glibc = new Set(output('readelf', ['--dyn-syms', '-W', binary]).match(/GLIBC_[0-9.]+/g) ?? [])
  if (glibc.size > 0) problems.push(`${platform} asks for glibc's symbol versions ${[...glibc].join(', ')}`)
  console.error(`check:musl: ${platform}: needs ${needed.join(', ')}; glibc symbols: ${glibc.size}`)
}

// x86_64: loaded by musl's dynamic loader.
const binary = join(root, 'keel.linux-x64-musl.node')
const dir = mkdtempSync(join(tmpdir(), 'keel-musl-'))
try {
  const node = output('readelf', ['--dyn-syms', '-W', binary])
    .split('\n')
    .filter((line) => / UND /.test(line))
    .map((line) => line.trim().split(/\s+/).at(-1)?.replace(/@.*/, '') ?? '')
    .filter((name) => /^(napi_|uv_)/.test(name))
  writeFileSync(join(dir, 'stubs.c'), [...new Set(node)].map((name) => `int ${name}(void) { return 0; }\n`).join(''))
  writeFileSync(
    join(dir, 'host.c'),
    '#include <dlfcn.h>\n#include <stdio.h>\n' +
      'int main(int argc, char **argv) {\n' +
      '  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);\n' +
      '  if (!lib) { printf("dlopen failed: %s\\n", dlerror()); return 1; }\n' +
      '  printf("napi_register_module_v1 %s\\n", dlsym(lib, "napi_register_module_v1") ? "found" : "missing");\n' +
      '  return 0;\n}\n',
  )
  output('musl-gcc', ['-rdynamic', '-o', join(dir, 'host'), join(dir, 'host.c'), join(dir, 'stubs.c')])
  const interpreter = /interpreter: ([^\]]+)\]/.exec(output('readelf', ['-l', join(dir, 'host')]))?.[1]
  const loaded = spawnSync(join(dir, 'host'), [binary], { encoding: 'utf8' })
  const line = `${loaded.stdout}${loaded.stderr}`.trim()
  console.error(`check:musl: linux-x64-musl loaded by ${interpreter} (Node's ${node.length} napi/uv functions stubbed): ${line}`)
  if (loaded.status !== 0 || line !== 'napi_register_module_v1 found') problems.push(`musl did not load linux-x64-musl: ${line}`)
  if (!interpreter?.includes('musl')) problems.push(`the loading program runs under ${interpreter}, not musl's loader`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}

if (problems.length > 0) {
  console.error(`check:musl: FAILED\n  ${problems.join('\n  ')}`)
  process.exit(1)
}
console.error('check:musl: ok')
