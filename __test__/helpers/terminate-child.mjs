// Starts worker threads that keep lock operations and Redis commands in
// flight, and terminates each one mid-flight, `times` times over. Exits 0
// and prints "survived" if the process lived through it.
import { Worker } from 'node:worker_threads'

const [url, times] = process.argv.slice(2)
const source = `
  const { lock, setLockStore, RedisLockStore, MemoryLockStore } = require('@shaferllc/keel/core')
  const { workerData } = require('node:worker_threads')
  const redis = new RedisLockStore(workerData.url)
  const jsStore = {
    acquire: async () => true, release: async () => true, extend: async () => true,
    isLocked: async () => false, remainingTime: async () => null,
  }
  const loop = async (store, prefix) => {
    for (let i = 0; ; i++) {
      setLockStore(store)
      await lock(prefix + (i % 7)).run(() => new Promise((r) => setTimeout(r, 0)), { timeout: 1000, retryDelay: 1 })
    }
  }
  // Redis waiters (with release announcements), memory, and a JS store, all at once.
  loop(redis, 'r'); loop(redis, 'r'); loop(new MemoryLockStore(), 'm'); loop(jsStore, 'j')
`
for (let i = 0; i < Number(times); i++) {
  const worker = new Worker(source, { eval: true, workerData: { url } })
  await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 30))
  await worker.terminate()
}
console.log('survived')
