import { Redis } from 'ioredis'
import { lock, setLockStore } from '@shaferllc/keel/core'
import { redisLockStore } from './__test__/fixtures/dist/docs-redis.js'
const client = new Redis(process.env.REDIS_URL)
const docs = redisLockStore(client)
const fresh = (s) => Buffer.from(s, 'latin1').toString('latin1')
const store = process.argv[2] === 'fresh' ? {
  acquire: (k, o, t) => docs.acquire(fresh(k), fresh(o), t), release: (k, o) => docs.release(fresh(k), fresh(o)),
  extend: docs.extend, isLocked: docs.isLocked, remainingTime: docs.remainingTime } : docs
setLockStore(store)
const noop = async () => {}
let n = 0; const end = performance.now() + 3000
await Promise.all(Array.from({ length: 64 }, async (_, i) => { const key = 'p' + i; while (performance.now() < end) { await lock(key).run(noop); n++ } }))
console.log(process.argv[2], Math.round(n / 3))
client.quit()
