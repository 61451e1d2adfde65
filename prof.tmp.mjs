import { Redis } from 'ioredis'
import { lock, setLockStore } from '@shaferllc/keel/core'
import { redisLockStore } from './__test__/fixtures/dist/docs-redis.js'
import { PlainLock } from './bench/baseline.mjs'
const client = new Redis(process.env.REDIS_URL)
const store = redisLockStore(client)
setLockStore(store)
const which = process.argv[2]
const noop = async () => {}
let n = 0; const end = performance.now() + 3000
await Promise.all(Array.from({ length: 64 }, async (_, i) => { const key = 'p' + i; while (performance.now() < end) { if (which === 'keel') await lock(key).run(noop); else await new PlainLock(store, key).run(noop); n++ } }))
console.log(which, Math.round(n / 3))
client.quit()
