'use strict'
/**
 * verifyLockStore's checks of the read-write methods a store written in JS
 * opts into (READ_WRITE_METHODS): readers share, a writer is alone, a
 * refused writer's mark keeps new readers out until it gets in, withdraws
 * or lapses, holds act only for their owner, and everything lapses at its
 * TTL. Run only for a store that has at least one of the methods.
 */

const { setTimeout: sleep } = require('node:timers/promises')
const { READ_WRITE_METHODS } = require('../core/protocol.js')

/**
 * @typedef {object} Tools what verify.js lends the checks
 * @property {(method: string, kind: 'boolean' | 'number' | 'count' | 'any', ...args: unknown[]) => Promise<any>} call
 *   one store call, bounded in time, its answer checked
 * @property {(condition: unknown, detail: string) => void} expect fails the check with `detail`
 * @property {(name: string) => string} key a key of the run's own
 * @property {Record<string, unknown>} methods the store
 * @property {number} ttlMs
 * @property {number} racers
 * @property {number} rounds
 */

/**
 * @param {Tools} tools
 * @returns {[name: string, run: () => Promise<string>][]}
 */
function readWriteChecks({ call, expect, key, methods, ttlMs, racers, rounds }) {
  const LONG = 10_000
  return [
    [
      'read-write: has all eight read-write methods',
      async () => {
        const missing = READ_WRITE_METHODS.filter((m) => typeof methods[m] !== 'function')
        expect(missing.length === 0, `it has some read-write methods but not ${missing.join(', ')}: a store opts into all of them or none`)
        return READ_WRITE_METHODS.join(', ')
      },
    ],
    [
      'read-write: readers share; a refused writer keeps new readers out; a writer is alone',
      async () => {
        const k = key('rw-share')
        expect(await call('acquireRead', 'boolean', k, 'R1', LONG), 'R1 could not take a read hold of a free key')
        expect(await call('acquireRead', 'boolean', k, 'R2', LONG), 'R2 was refused a read hold beside R1: readers share')
        const two = await call('holders', 'count', k)
        expect(two === 2, `holders is ${two} with two readers in`)
        expect((await call('readersWait', 'boolean', k)) === false, 'readersWait is true while only readers hold the key')
        expect((await call('acquireWrite', 'boolean', k, 'W', LONG)) === false, 'W took the write hold while readers held the key')
        expect(await call('readersWait', 'boolean', k), 'readersWait is false after a writer was refused: its mark must keep new readers out')
        expect((await call('acquireRead', 'boolean', k, 'R3', LONG)) === false, 'R3 took a read hold while a writer waited')
        expect(await call('releaseHold', 'boolean', k, 'R1'), "R1's release answered false")
        expect((await call('releaseHold', 'boolean', k, 'R1')) === false, "R1's second release answered true")
        expect(await call('releaseHold', 'boolean', k, 'R2'), "R2's release answered false")
        expect(await call('acquireWrite', 'boolean', k, 'W', LONG), 'W could not take the write hold once the readers left')
        expect(await call('releaseHold', 'boolean', k, 'W'), "W's release answered false")
        expect((await call('readersWait', 'boolean', k)) === false, "readersWait is true after W got in and left: getting in must clear the writer's mark")
        expect(await call('acquireWrite', 'boolean', k, 'W', LONG), 'W could not take the write hold of a free key')
        const one = await call('holders', 'count', k)
        expect(one === 1, `holders is ${one} with the writer in`)
        expect(await call('readersWait', 'boolean', k), 'readersWait is false while a writer holds the key')
        expect((await call('acquireRead', 'boolean', k, 'R3', LONG)) === false, 'a reader got in beside the writer')
        expect((await call('acquireWrite', 'boolean', k, 'W2', LONG)) === false, 'a second writer got in beside the first')
        expect(await call('releaseHold', 'boolean', k, 'W'), "the writer's release answered false")
        expect(await call('readersWait', 'boolean', k), "readersWait is false while W2's mark stands")
        await call('withdrawWriter', 'any', k)
        expect((await call('readersWait', 'boolean', k)) === false, 'readersWait is still true after withdrawWriter')
        expect(await call('acquireRead', 'boolean', k, 'R3', LONG), 'a reader was refused after the waiting writer withdrew')
        expect(await call('releaseHold', 'boolean', k, 'R3'), "R3's release answered false")
        const none = await call('holders', 'count', k)
        expect(none === 0, `holders is ${none} after every hold was released`)
        return 'two readers in together; a writer refused, then readers kept out; the writer alone; withdrawn'
      },
    ],
    [
      'read-write: acquires are atomic: of racing writers and readers, one writer or only readers get in',
      async () => {
        const outcomes = []
        for (let round = 0; round < rounds; round++) {
          const k = key(`rw-race-${round}`)
          const owners = Array.from({ length: racers }, (_, i) => `${i % 2 ? 'writer' : 'reader'}-${round}-${i}`)
          const answers = await Promise.all(
            owners.map((owner) => call(owner.startsWith('writer') ? 'acquireWrite' : 'acquireRead', 'boolean', k, owner, LONG)),
          )
          const won = owners.filter((_, i) => answers[i])
          const writers = won.filter((o) => o.startsWith('writer')).length
          expect(won.length > 0, `round ${round + 1}: nobody of ${racers} racers got in`)
          expect(writers === 0 || won.length === 1, `round ${round + 1}: ${writers} writer(s) and ${won.length - writers} reader(s) got in together`)
          outcomes.push(writers ? 'a writer' : `${won.length} readers`)
          for (const owner of won) expect(await call('releaseHold', 'boolean', k, owner), `${owner} could not release`)
          await call('withdrawWriter', 'any', k)
        }
        return `${rounds} rounds of ${racers} racers: ${outcomes.join(', ')}`
      },
    ],
    [
      'read-write: releaseHold, extendHold and holdRemaining act only for the owner',
      async () => {
        const k = key('rw-owner')
        expect(await call('acquireWrite', 'boolean', k, 'A', LONG), 'A could not take the write hold of a free key')
        expect((await call('acquireRead', 'boolean', k, 'C', LONG)) === false, 'a reader got in beside the writer A')
        expect((await call('releaseHold', 'boolean', k, 'B')) === false, "B's release of A's hold answered true")
        expect((await call('extendHold', 'boolean', k, 'B', 60_000)) === false, "B's extend of A's hold answered true")
        expect((await call('holdRemaining', 'number', k, 'B')) === null, 'holdRemaining of B, who holds nothing, is not null')
        const before = await call('holdRemaining', 'number', k, 'A')
        expect(before !== null && before > 0 && before <= LONG, `A's holdRemaining is ${before} (TTL ${LONG})`)
        expect(await call('extendHold', 'boolean', k, 'A', 60_000), "A's extend of its own hold answered false")
        const after = await call('holdRemaining', 'number', k, 'A')
        expect(after !== null && after > LONG && after <= 60_000, `A's holdRemaining after extending to 60000 is ${after}`)
        expect(await call('releaseHold', 'boolean', k, 'A'), "A's release answered false")
        expect(await call('acquireRead', 'boolean', k, 'C', LONG), 'C could not take a read hold after the writer left')
        expect(await call('acquireRead', 'boolean', k, 'D', LONG), 'D could not take a read hold beside C')
        expect(await call('extendHold', 'boolean', k, 'C', 60_000), "C's extend of its read hold answered false")
        const read = await call('holdRemaining', 'number', k, 'C')
        expect(read !== null && read > LONG, `C's holdRemaining after extending to 60000 is ${read}`)
        const other = await call('holdRemaining', 'number', k, 'D')
        expect(other !== null && other <= LONG, `D's holdRemaining is ${other} after C extended its own: an extend moved another reader's hold`)
        expect(await call('releaseHold', 'boolean', k, 'C'), "C's release answered false")
        const left = await call('holders', 'count', k)
        expect(left === 1, `holders is ${left} after C's release: a release ended another reader's hold`)
        expect(await call('releaseHold', 'boolean', k, 'D'), "D's release answered false")
        return `B refused; A's write hold pushed from ${before} to ${after} ms; C's read hold extended and released, D's left alone`
      },
    ],
    [
      "read-write: holds and a refused writer's mark lapse at their TTL",
      async () => {
        const k = key('rw-ttl')
        expect(await call('acquireRead', 'boolean', k, 'R', ttlMs), 'R could not take a read hold of a free key')
        expect((await call('acquireWrite', 'boolean', k, 'W', ttlMs)) === false, 'W took the write hold beside a reader')
        await sleep(Math.floor(ttlMs / 3))
        const held = await call('holders', 'count', k)
        expect(held === 1, `holders is ${held} a third of the TTL in`)
        await sleep(ttlMs + 100)
        const gone = await call('holders', 'count', k)
        expect(gone === 0, `holders is ${gone} ${ttlMs + 100} ms after the TTL`)
        expect((await call('readersWait', 'boolean', k)) === false, "readersWait is true after the refused writer's TTL passed")
        expect((await call('holdRemaining', 'number', k, 'R')) === null, "holdRemaining of R's lapsed hold is not null")
        expect((await call('extendHold', 'boolean', k, 'R', LONG)) === false, "R extended a hold that had lapsed")
        expect(await call('acquireWrite', 'boolean', k, 'W2', ttlMs), 'a writer could not get in once everything lapsed')
        await sleep(ttlMs + 100)
        expect(await call('acquireRead', 'boolean', k, 'R2', LONG), "a reader could not get in after the writer's TTL passed")
        expect((await call('releaseHold', 'boolean', k, 'W2')) === false, "the lapsed writer's late release answered true")
        expect(await call('releaseHold', 'boolean', k, 'R2'), "R2's release answered false")
        return `held within ${ttlMs} ms, free after; the mark and the writer lapsed too`
      },
    ],
  ]
}

module.exports = { readWriteChecks }
