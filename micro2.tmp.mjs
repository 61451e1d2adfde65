import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const native = require('./binding.js')
const h = native.createMemoryStore()
for (let i = 0; i < 5e6; i++) { const o = native.acquire(h, 'invoice:42', 30000); native.release(h, 'invoice:42', o) }
