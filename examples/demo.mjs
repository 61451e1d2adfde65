// A tour of the lock on the default in-memory store: run with `npm run demo`.
import { lock, restoreLock } from '@shaferllc/keel/core'
import { setTimeout as sleep } from 'node:timers/promises'

const say = (...words) => console.log(...words)

// 1. Several workers race to charge one invoice. Exactly one charges.
say('1. Five workers race to charge invoice:42')
let charges = 0
const charge = async (worker) => {
  charges++
  await sleep(50) // talking to the payment provider
  return `charged by worker ${worker}`
}
const outcomes = await Promise.all(
  [1, 2, 3, 4, 5].map(async (worker) => {
    const [ran, receipt] = await lock('invoice:42').run(() => charge(worker))
    say(ran ? `   worker ${worker}: ${receipt}` : `   worker ${worker}: skipped, another worker is charging it`)
    return ran
  }),
)
say(`   => ${outcomes.filter(Boolean).length} charge, ${charges} call to the provider\n`)

// 2. Waiting for a held lock, with a timeout.
say('2. A report rebuild waits for the one in progress')
const first = lock('report', 10_000)
await first.acquire()
setTimeout(() => first.release(), 200)
const started = Date.now()
const [waited] = await lock('report').run(async () => say('   rebuilding the report'), {
  timeout: 2_000,
  retryDelay: 25,
})
say(`   => ran: ${waited}, after waiting ${Date.now() - started} ms`)
const holder = lock('report')
await holder.acquire()
const [impatient] = await lock('report').runImmediately(() => say('   (never printed)'))
say(`   => a caller that will not wait while it is held gives up at once: ran ${impatient}\n`)
await holder.release()

// 3. Work that outruns its TTL extends the lock from inside.
say('3. A long import extends its 300 ms lock between batches')
await lock('import', 300).run(async (l) => {
  for (const batch of [1, 2, 3]) {
    await sleep(200)
    await l.extend()
    say(`   batch ${batch} done, ${await l.getRemainingTime()} ms left on the lock`)
  }
})
say('   => 600 ms of work under a 300 ms lock, never lost\n')

// 4. One worker takes the lock, another finishes the job.
say('4. Handing a lock to another worker with serialize()/restoreLock()')
const a = lock('import:99', 60_000)
await a.acquire()
const message = a.serialize()
say(`   worker A queued: ${message}`)
const b = restoreLock(message)
await b.extend(60_000)
say(`   worker B extended it; held: ${await b.isLocked()}; released by B: ${await b.release()}`)
say(`   => free again: ${!(await lock('import:99').isLocked())}`)
