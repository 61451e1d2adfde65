#!/usr/bin/env node
// `node scripts/under-load.mjs [--runs N] [--loops N] [test files...]`: the
// timing-sensitive test files run N times in a row (default 3) with N busy
// loops beside them (default 3: more than this machine's 2 cores), as on a
// CI machine running other jobs. A test asserts behaviour, not speed: each
// run must pass whole. Without files it runs the ones that wait on real
// timers against TTLs (autoExtend, lapses) across the memory store, Redis
// through latency and PostgreSQL over a unix socket, and the docs' examples.

import { spawn } from 'node:child_process'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const { values, positionals } = parseArgs({
  options: { runs: { type: 'string', default: '3' }, loops: { type: 'string', default: '3' } },
  allowPositionals: true,
})
const files = positionals.length
  ? positionals
  : [
      '__test__/api/fake-timers.test.mjs',
      '__test__/api/signal.test.mjs',
      '__test__/stores/contract/memory.test.mjs',
      '__test__/stores/contract/redis-latency.test.mjs',
      '__test__/stores/contract/postgres-unix-socket.test.mjs',
      '__test__/package/docs.test.mjs',
    ]

const loops = Array.from({ length: Number(values.loops) }, () =>
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
)
const stop = () => loops.forEach((loop) => loop.kill('SIGKILL'))
process.on('exit', stop)

let failed = 0
for (let run = 1; run <= Number(values.runs); run++) {
  const started = Date.now()
  const code = await new Promise((resolve) => {
    const child = spawn(process.execPath, ['--test', '--test-concurrency=3', '--test-reporter=dot', ...files], {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit'],
    })
    child.on('close', resolve)
  })
  console.error(`under-load: run ${run} beside ${loops.length} busy loops: ${code === 0 ? 'passed' : 'FAILED'} (${((Date.now() - started) / 1000).toFixed(0)} s)`)
  if (code !== 0) failed++
}
stop()
process.exit(failed > 0 ? 1 : 0)
