import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const native = require('./binding.js')
const { lock } = require('./index.js')
const h = native.createMemoryStore()
function time(name, n, f) { const t = process.hrtime.bigint(); for (let i = 0; i < n; i++) f(i); const ns = Number(process.hrtime.bigint() - t) / n; console.log(name.padEnd(30), ns.toFixed(0), 'ns') }
for (let r = 0; r < 2; r++) {
time('acquire+release (native)', 1e6, () => { const o = native.acquire(h, 'invoice:42', 30000); native.release(h, 'invoice:42', o) })
time('limits() noop-ish', 1e6, () => native.memoryStoreSize(h))
time('lock(key)', 1e6, () => lock('invoice:42'))
time('randomUUID', 1e6, () => crypto.randomUUID())
}
let n = 0; const t = process.hrtime.bigint()
for (let i = 0; i < 5e5; i++) await lock('invoice:42').run(async () => 1)
console.log('run cycle', (Number(process.hrtime.bigint() - t) / 5e5).toFixed(0), 'ns')
