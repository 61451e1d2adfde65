// The store contract: what every LockStore must do, seen through lock() and
// the store itself, against its real server where it has one. A store's test
// file registers all of it with one call, and a new store gets every check the
// same way:
//
//   storeContract('RedisLockStore', { open, fencing: true, processes: true, announcesReleases: true })
//
// `open()` resolves to `{ store, close, env, deleteKey }`. The store is
// opened once for the file and each check takes keys of its own, so a shared
// server is fine. `close()` lets it go. `env` (with `processes`) is what
// helpers/child.mjs needs to open the same store in another process.
// `deleteKey(key)` (optional) removes a lock behind the lock's back, as an
// operator or a flush would.
//
// The capabilities are where stores really differ:
//   fencing            each acquisition carries a fencing token, a number growing per key (else null)
//   fencingByOwner     the store can tell a hold's token from its owner later, so a handle
//                      restored from serialize() has the token too
//   expiresExactly     the store lets go the moment the lock's own clock says the TTL passed
//   lapsesLate         ms a hold whose process is gone may still be held after its TTL (a
//                      lease counted in whole seconds): the checks on a dead holder wait that longer
//   processes          other processes open the same store from `env`, so the cross-process checks run
//   announcesReleases  a release in another process wakes a waiter here at once, not at its next poll
//   announcesKinds     the same for semaphores and read-write locks (as announcesReleases unless given)
//   anyKey             keys of any size and content: 1 MB, NUL characters
//   pings              a store on a server: ping() answers once the server did
//   semaphores, readWrite  how the store keeps semaphores and read-write locks (contract-kinds.mjs)

import { describe, test, before, after, beforeEach } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { lock, restoreLock, setLockStore, verifyLockStore, LockNotHeldError } from '@shaferllc/keel/core'
import { uniqueKey } from '../../support/servers.mjs'
import { jsStoreOver } from '../helpers/js-stores.mjs'
import { runChild, startHolder, killHard } from '../helpers/processes.mjs'
import { eventually } from '../helpers/eventually.mjs'
import { kindsContract } from './contract-kinds.mjs'
import { tracingContract } from './contract-tracing.mjs'

/** The cross-process counter check: how many processes, each incrementing how many times. */
export const PROCESSES = 4
export const INCREMENTS = 25
const SLOW_POLL = { retryDelay: 60_000 } // a waiter woken within the test was woken by the release

/** Resolves with the time (ms after `from`) the signal aborted, or rejects after `ms`. */
const abortedAt = (signal, from, ms = 5_000) =>
  new Promise((resolve, reject) => {
    if (signal.aborted) return resolve(performance.now() - from)
    const t = setTimeout(() => reject(new Error(`not aborted within ${ms} ms`)), ms)
    signal.addEventListener('abort', () => {
      clearTimeout(t)
      resolve(performance.now() - from)
    })
  })

/** Holds the JS thread for `ms`: no timer fires and no reply is read meanwhile. */
const busy = (ms) => {
  const until = performance.now() + ms
  while (performance.now() < until);
}

const increasing = (tokens) => tokens.every((t, i) => i === 0 || t > tokens[i - 1])

/**
 * Registers the whole contract, as one suite named `label`, for the store
 * `open()` resolves to. The capability flags are described at the top of this file.
 */
export function storeContract(
  label,
  {
    open,
    fencing = false,
    fencingByOwner = false,
    expiresExactly = false,
    lapsesLate = 0,
    processes = false,
    announcesReleases = false,
    announcesKinds = announcesReleases,
    anyKey = false,
    semaphores = 'slots',
    readWrite = false,
    pings = false,
  },
) {
  describe(label, () => {
    let opened
    let store
    let dir

    before(async () => {
      opened = await open()
      store = opened.store
      if (processes) assert.ok(opened.env?.KEEL_TEST_STORE, `${label}: open() must give the env a child opens the store from`)
      dir = mkdtempSync(join(tmpdir(), 'keel-contract-'))
    })
    after(async () => {
      await opened?.close()
      if (dir) rmSync(dir, { recursive: true, force: true })
    })
    beforeEach(() => setLockStore(store))

    describe('semaphores and read-write locks', () => {
      kindsContract(() => ({ opened, dir }), { semaphores, readWrite, fencing, processes, announcesReleases: announcesKinds, lapsesLate })
    })

    describe('tracing and cancelling a wait', () => {
      tracingContract(() => ({ opened }), { fencing, readWrite })
    })

    if (pings) {
      test('ping() resolves once the server answered, over this transport', async () => {
        assert.equal(await store.ping(), undefined)
        const both = await Promise.all([store.ping(), lock(uniqueKey('after-ping')).isLocked()])
        assert.deepEqual(both, [undefined, false])
      })
    }

    test('acquire, isLocked, getRemainingTime, extend, release', async () => {
      const key = uniqueKey('invoice')
      const l = lock(key, 2_000)
      assert.equal(await l.isLocked(), false)
      assert.equal(await l.getRemainingTime(), null)
      assert.equal(await l.acquire(), true)
      assert.equal(await l.isLocked(), true)
      const left = await l.getRemainingTime()
      assert.ok(left > 1_000 && left <= 2_000, `remaining ${left}`)
      assert.equal(await lock(key).acquireImmediately(), false, 'a second owner is refused')
      await l.extend(20_000)
      assert.ok((await l.getRemainingTime()) > 10_000)
      assert.equal(await l.isExpired(), false)
      assert.equal(await l.release(), true)
      assert.equal(await l.release(), false, 'a second release is a no-op')
      assert.equal(await l.isLocked(), false)
      await assert.rejects(l.extend(), LockNotHeldError)
    })

    test('run() holds the lock for the callback and frees it after, even on a throw', async () => {
      const key = uniqueKey('send')
      const [ran, value] = await lock(key).run(async () => {
        assert.equal(await lock(key).isLocked(), true)
        return 'sent'
      })
      assert.deepEqual([ran, value], [true, 'sent'])
      assert.equal(await lock(key).isLocked(), false)
      await assert.rejects(
        lock(key).run(async () => {
          throw new Error('boom')
        }),
        { message: 'boom' },
      )
      assert.equal(await lock(key).isLocked(), false)
    })

    test('a waiter gets the lock when the holder releases, and gives up at its timeout', async () => {
      const key = uniqueKey('migrate')
      const holder = lock(key, 10_000)
      assert.equal(await holder.acquire(), true)
      const started = Date.now()
      assert.equal(await lock(key).acquire({ timeout: 150, retryDelay: 20 }), false)
      assert.ok(Date.now() - started >= 140, 'waited for its timeout')
      const waiting = lock(key).acquire({ timeout: 5_000, retryDelay: 10 })
      await sleep(60)
      await holder.release()
      assert.equal(await waiting, true)
    })

    test('an expired lock is free, and its old owner can neither extend nor release it', async () => {
      const key = uniqueKey('expiring')
      const a = lock(key, 200)
      assert.equal(await a.acquire(), true)
      await sleep(350)
      assert.equal(await lock(key).isLocked(), false)
      assert.equal(await lock(key).getRemainingTime(), null)
      const b = lock(key, 10_000)
      assert.equal(await b.acquire(), true)
      assert.equal(await a.release(), false)
      await assert.rejects(a.extend(), LockNotHeldError)
      assert.equal(await a.isExpired(), true)
      assert.equal(await b.isLocked(), true)
      assert.equal(await b.release(), true)
    })

    test('keys are exact: unicode, long, and similar keys do not collide', async () => {
      const base = uniqueKey('k')
      const keys = [`${base}`, `${base} `, `${base}:é`, `${base}:🔒`, `${base}:${'x'.repeat(2_000)}`]
      const locks = keys.map((k) => lock(k, 5_000))
      for (const l of locks) assert.equal(await l.acquire(), true, l.key.slice(0, 30))
      for (const l of locks) assert.equal(await l.release(), true)
    })

    if (anyKey) {
      test('a 1 MB key, keys with NUL and emoji, all exact', async () => {
        const base = uniqueKey('odd')
        const keys = [`${base}:${'k'.repeat(1024 * 1024)}`, `${base}:a\u0000b`, `${base}:a`, `${base}:🔒🗝️`, `${base}:\u0000`]
        const held = keys.map((k) => lock(k, 10_000))
        for (const l of held) assert.equal(await l.acquire(), true)
        // "a\0b" and "a" are different keys; so is the NUL-only one.
        for (const k of keys) assert.equal(await lock(k).acquireImmediately(), false)
        const big = restoreLock(held[0].serialize())
        await big.extend(20_000)
        assert.ok((await big.getRemainingTime()) > 10_000)
        for (const l of held) assert.equal(await l.release(), true)
        for (const k of keys) assert.equal(await lock(k).isLocked(), false)
      })
    }

    test('10,000 distinct keys locked at once, then released', async () => {
      const base = uniqueKey('many')
      const locks = Array.from({ length: 10_000 }, (_, i) => lock(`${base}:${i}`, 30_000))
      const taken = await Promise.all(locks.map((l) => l.acquire()))
      assert.equal(taken.filter(Boolean).length, 10_000)
      const released = await Promise.all(locks.map((l) => l.release()))
      assert.equal(released.filter(Boolean).length, 10_000)
    })

    test('keys and owners that look like Lua or SQL are only ever data', async () => {
      const canary = uniqueKey('canary')
      const hostile = [
        `${canary}") redis.call("flushall") --`,
        `${canary}]] return redis.call("del", KEYS[1]) --[[`,
        `${canary}'; DROP TABLE locks; --`,
        `${canary}" OR 1=1 --`,
      ]
      const guard = lock(canary, 30_000)
      assert.equal(await guard.acquire(), true)
      for (const key of hostile) {
        const l = lock(key, 30_000)
        assert.equal(await l.acquire(), true, key)
        assert.equal(await lock(key).acquireImmediately(), false)
        // A hostile owner token in a restored lock: it releases nothing.
        const forged = restoreLock(JSON.stringify({ key: canary, ttlMs: 1000, owner: `x' OR '1'='1` }))
        assert.equal(await forged.release(), false)
        assert.equal(await l.release(), true)
      }
      assert.equal(await guard.isLocked(), true, 'the other lock was never touched')
      assert.equal(await guard.release(), true)
    })

    test('a fractional TTL is held for whole milliseconds, rounded up', async () => {
      const key = uniqueKey('fraction')
      const l = lock(key, 1_500.5)
      assert.equal(await l.acquire(), true)
      assert.equal(await lock(key).acquireImmediately(), false)
      const left = await l.getRemainingTime()
      assert.ok(left > 1_000 && left <= 1_501, `remaining ${left}`)
      await l.extend(2_500.2)
      assert.ok((await l.getRemainingTime()) > 2_000)
      assert.deepEqual(await lock(key, 0.5).run(() => 'ran'), [false, undefined])
      assert.equal(await l.release(), true)
      assert.deepEqual(await lock(key, 0.5).run(() => 'ran'), [true, 'ran'])
    })

    test('a serialized lock restored in the same process acts as the same owner', async () => {
      const key = uniqueKey('import')
      const l = lock(key, 5_000)
      await l.acquire()
      const copy = restoreLock(l.serialize())
      await copy.extend(9_000)
      assert.ok((await l.getRemainingTime()) > 5_000)
      assert.equal(await copy.release(), true)
      assert.equal(await l.isLocked(), false)
    })

    test("once run() resolves, the key's next operations through the store find it released", async () => {
      // A store may end run() once its release is on its way rather than
      // answered: the next attempt, right behind it, must still find it free.
      const key = uniqueKey('run-again')
      for (let i = 0; i < 200; i++) {
        const [ran] = await lock(key, 30_000).runImmediately(() => i)
        assert.equal(ran, true, `run ${i} found the lock still held`)
        if (i % 40 === 0) assert.equal(await store.isLocked(key), false, `after run ${i}`)
      }
      const [ran] = await lock(key, 30_000).run(async () => {
        throw new Error('boom')
      }).catch((e) => [e.message])
      assert.equal(ran, 'boom')
      assert.equal(await store.isLocked(key), false, 'after a callback that threw')
    })

    test("a run()'s callback lock acts on its own acquisition, not on a later one through the same handle", async () => {
      const key = uniqueKey('job')
      // (A TTL of 1.2 s, renewed every 400 ms: B's autoExtend keeps it through an 800 ms stall
      // of a busy machine's event loop or of the store's answers; 600 ms lost it once, the docs'
      // database store on PostgreSQL beside the whole suite.)
      const h = lock(key, 1_200)
      let bInside = false
      const a = h.run(async (l) => {
        const token = l.fencingToken
        const signal = l.signal
        assert.notEqual(l, h, 'the callback gets a handle of its own')
        await sleep(2_600) // A's hold lapses; B takes the lock through the same handle
        assert.ok(bInside)
        assert.equal(l.fencingToken, null, "A's hold is gone: no token, and never B's")
        await assert.rejects(l.extend(), LockNotHeldError)
        assert.equal(signal.aborted, true)
        assert.ok(signal.reason instanceof LockNotHeldError)
        assert.equal(await l.release(), false, "A's release does not free B's hold")
        assert.equal(await l.isExpired(), true)
        assert.equal(await lock(key).acquire(), false, 'a third worker still finds the lock held by B')
        return token
      })
      await sleep(20)
      const b = h.run(
        async (l) => {
          bInside = true
          const token = l.fencingToken
          assert.equal(h.fencingToken, token, 'the shared handle speaks for its latest acquisition')
          await sleep(2_400)
          assert.equal(l.signal.aborted, false, "B's autoExtend kept B's hold")
          assert.equal(l.fencingToken, token)
          return token
        },
        { timeout: 5_000, autoExtend: true },
      )
      const [[ranA, tokenA], [ranB, tokenB]] = await Promise.all([a, b])
      assert.equal(ranA, true)
      assert.equal(ranB, true)
      if (fencing) assert.ok(tokenB > tokenA, `${tokenB} > ${tokenA}`)
      assert.equal(await lock(key).isLocked(), false, "B's run() released B's hold")
      assert.equal(h.fencingToken, null)
    })

    if (fencing) {
      test('fencing tokens grow per key, across expiry, other keys and handles; null when nothing is held', async () => {
        const key = uniqueKey('job')
        const other = uniqueKey('other')
        const l = lock(key, 30)
        assert.equal(l.fencingToken, null, 'not acquired yet')
        const tokens = []
        for (let i = 0; i < 5; i++) {
          assert.equal(await l.acquire(), true)
          tokens.push(l.fencingToken)
          assert.equal(l.fencingToken, tokens.at(-1), 'stable while held')
          if (i % 2 === 0) await l.release()
          else await sleep(40) // lapses instead
          assert.deepEqual(await lock(other).run(async (o) => typeof o.fencingToken), [true, 'number'])
        }
        assert.ok(increasing(tokens), tokens.join(' '))
        assert.ok(tokens.every((t) => Number.isSafeInteger(t) && t > 0))
        assert.equal(l.fencingToken, null, 'released or lapsed: no token')
        if (fencingByOwner) {
          const held = lock(key)
          await held.acquire()
          assert.equal(restoreLock(held.serialize()).fencingToken, held.fencingToken, 'a restored handle finds the same hold')
          await held.release()
        }
      })
    } else {
      test('an acquisition carries no fencing token: null while held', async () => {
        const l = lock(uniqueKey('unfenced'))
        assert.equal(l.fencingToken, null)
        assert.deepEqual(await l.run(async (held) => held.fencingToken), [true, null])
        assert.equal(l.fencingToken, null)
      })
    }

    test('verifyLockStore passes every check', async () => {
      const report = await verifyLockStore(store)
      assert.equal(report.ok, true, JSON.stringify(report, null, 2))
      // (A store written in JS with the read-write methods gets their five checks too.)
      assert.equal(report.checks.length, typeof store.acquireRead === 'function' ? 12 : 7)
      assert.ok(report.checks.every((c) => c.ok && typeof c.detail === 'string' && c.name.length > 0))
    })

    // Waiting for a held lock.

    test('waiters get the lock in arrival order', async () => {
      const key = uniqueKey('fifo')
      const holder = lock(key)
      await holder.acquire()
      const order = []
      const waiters = Array.from({ length: 6 }, (_, i) =>
        lock(key).run(
          async () => {
            order.push(i)
            await sleep(2)
          },
          { timeout: 10_000, ...SLOW_POLL },
        ),
      )
      // Every first attempt answered (refused) and queued before the release,
      // with room for a loaded machine: a round trip each, through a pool.
      await sleep(250)
      await holder.release()
      await Promise.all(waiters)
      assert.deepEqual(order, [0, 1, 2, 3, 4, 5])
    })

    test('a release wakes the waiter at once, not at its next poll', async () => {
      const key = uniqueKey('wake')
      const holder = lock(key)
      await holder.acquire()
      const waiting = lock(key).acquire({ timeout: 10_000, ...SLOW_POLL })
      await sleep(30)
      const released = Date.now()
      await holder.release()
      assert.equal(await waiting, true)
      assert.ok(Date.now() - released < 500, `took ${Date.now() - released} ms after the release`)
    })

    test('workers looping straight back cannot starve the others', async () => {
      const key = uniqueKey('loop')
      const counts = Array(8).fill(0)
      let timeouts = 0
      let inside = 0
      let overlaps = 0
      const end = Date.now() + 600
      await Promise.all(
        counts.map(async (_, w) => {
          while (Date.now() < end) {
            const [ran] = await lock(key).run(
              async () => {
                if (++inside > 1) overlaps++
                await sleep(1)
                inside--
              },
              { timeout: 2_000 },
            )
            if (ran) counts[w]++
            else timeouts++
          }
        }),
      )
      assert.equal(overlaps, 0)
      assert.equal(timeouts, 0)
      const fewest = Math.min(...counts)
      const most = Math.max(...counts)
      assert.ok(fewest > 0 && most - fewest <= 2, `turns were not shared: ${counts}`)
    })

    test('a waiter gives up at its timeout, not at its next poll', async () => {
      const key = uniqueKey('timeout')
      await lock(key).acquire()
      const started = Date.now()
      assert.equal(await lock(key).acquire({ timeout: 150, ...SLOW_POLL }), false)
      const waited = Date.now() - started
      assert.ok(waited >= 145 && waited < 1_000, `waited ${waited} ms`)
    })

    test('after a waiter times out, the one behind it is still served', async () => {
      const key = uniqueKey('behind')
      const holder = lock(key)
      await holder.acquire()
      const first = lock(key).acquire({ timeout: 50, ...SLOW_POLL })
      const second = lock(key).acquire({ timeout: 10_000, ...SLOW_POLL })
      assert.equal(await first, false)
      await holder.release()
      assert.equal(await second, true)
    })

    // Lock.signal and autoExtend.

    test("a held lock's signal is live; release does not abort it, and the next hold gets a new one", async () => {
      const l = lock(uniqueKey('live'), 5_000)
      assert.equal(await l.acquire(), true)
      const first = l.signal
      assert.equal(first.aborted, false)
      assert.equal(l.signal, first, 'one signal per hold')
      assert.equal(await l.release(), true)
      assert.equal(first.aborted, false, 'a release is not a loss')
      assert.equal(l.signal.aborted, true, 'after release the handle holds nothing')
      assert.equal(await l.acquire(), true)
      assert.notEqual(l.signal, first)
      assert.equal(l.signal.aborted, false)
      await l.release()
    })

    test('the TTL passing without an extension aborts the signal, not before', async () => {
      const l = lock(uniqueKey('lapse'), 300)
      const start = performance.now()
      assert.equal(await l.acquire(), true)
      const at = await abortedAt(l.signal, start)
      assert.ok(at >= 250 && at < 1_000, `aborted after ${at} ms (TTL 300)`)
      assert.ok(l.signal.reason instanceof LockNotHeldError)
      assert.equal(await l.isExpired(), true)
      if (expiresExactly) assert.equal(await l.isLocked(), false, 'it aborts exactly as the store lets go')
    })

    test('an extension moves the deadline; a failed one aborts at once', async () => {
      // Margins of 400 ms and more: a loaded machine (test files run side by
      // side) may be that late to wake or to answer.
      const l = lock(uniqueKey('extend'), 600)
      const start = performance.now()
      assert.equal(await l.acquire(), true)
      const { signal } = l
      await sleep(200)
      // (A timer of 200 ms may end a fraction of a millisecond early: the
      // deadline runs from when the extension was sent.)
      const extendedAt = performance.now() - start
      await l.extend(1_200)
      await sleep(600)
      assert.equal(signal.aborted, false, 'still held 800 ms in (past the first TTL), after extending to 1200 ms at 200')
      const at = await abortedAt(signal, start)
      assert.ok(at >= extendedAt + 1_200, `aborted after ${at} ms, extended at ${extendedAt} ms`)
      // Lost to someone else: extend() rejects and the signal aborts with it.
      const m = lock(uniqueKey('stolen'), 200)
      assert.equal(await m.acquire(), true)
      const lost = m.signal
      await sleep(250)
      assert.equal(await store.acquire(m.key, 'someone else', 5_000), true)
      await assert.rejects(m.extend(), LockNotHeldError)
      assert.equal(lost.aborted, true)
      assert.ok(lost.reason instanceof LockNotHeldError)
      assert.equal(await store.release(m.key, 'someone else'), true)
    })

    test('run(fn, { autoExtend: true }) keeps the lock past its TTL, then releases and stops', async () => {
      const key = uniqueKey('auto')
      let signal
      // (A TTL of 600 ms, renewed every 200: a renewal may come 400 ms late, as on a busy machine.)
      const [ran, seen] = await lock(key, 600).run(
        async (l) => {
          signal = l.signal
          const checks = []
          for (let i = 0; i < 6; i++) {
            await sleep(200)
            checks.push(await store.acquire(key, 'intruder', 1_000))
          }
          return checks
        },
        { autoExtend: true },
      )
      assert.equal(ran, true)
      assert.deepEqual(seen, [false, false, false, false, false, false], 'nobody got in during 1.2 s on a 600 ms TTL')
      assert.equal(signal.aborted, false)
      assert.equal(await store.isLocked(key), false, 'released at the end')
      await sleep(200)
      assert.equal(await store.isLocked(key), false, 'no extension after release')
    })

    test('autoExtend that finds the lock gone aborts the signal and stops', async () => {
      // Gone in two ways: the store stops honouring the extensions while it
      // still holds the key, and (where the file can reach the data) the key
      // is deleted behind the lock's back.
      const ways = ['extensions refused', ...(opened.deleteKey ? ['key deleted'] : [])]
      for (const way of ways) {
        let refused = false
        if (way === 'extensions refused') {
          setLockStore(jsStoreOver(store, { extend: async (k, o, t) => (refused ? false : store.extend(k, o, t)) }))
        }
        // (A TTL of 600 ms, renewed every 200: the check at 150 ms holds with a renewal 450 ms late.)
        const l = lock(uniqueKey('gone'), 600)
        assert.equal(await l.acquire({ autoExtend: true }), true)
        const { signal } = l
        await sleep(150)
        assert.equal(signal.aborted, false, way)
        const start = performance.now()
        if (way === 'extensions refused') refused = true
        else await opened.deleteKey(l.key)
        const at = await abortedAt(signal, start)
        // The next renewal finds it gone (200 ms on a quiet machine), and the TTL's own deadline
        // aborts it anyway: within two TTLs holds with timers a busy machine runs late.
        assert.ok(at < 1_200, `${way}: aborted ${at} ms after the loss (renewals every 200 ms, a 600 ms TTL)`)
        assert.ok(signal.reason instanceof LockNotHeldError)
        assert.equal(await l.isExpired(), true, way)
        assert.equal(await l.release(), false, way)
        setLockStore(store)
      }
    })

    test('an event loop stalled longer than the TTL sees the signal aborted when it wakes', async () => {
      const l = lock(uniqueKey('stall'), 200)
      assert.equal(await l.acquire({ autoExtend: true }), true)
      const { signal } = l
      busy(450)
      // Before any timer or answer: reading the signal already knows.
      assert.equal(l.signal.aborted, true)
      assert.equal(signal.aborted, true)
      assert.ok(signal.reason instanceof LockNotHeldError)

      const m = lock(uniqueKey('stall-timer'), 200)
      assert.equal(await m.acquire({ autoExtend: true }), true)
      const held = m.signal
      busy(450)
      // Without reading it again: the first timer after the stall aborts it.
      await new Promise((resolve) => setImmediate(resolve))
      await sleep(0)
      assert.equal(held.aborted, true)
    })

    if (!processes) return

    // Across processes: child processes (helpers/child.mjs) open the same store.

    function counterFile() {
      const file = join(dir, `counter-${Math.random().toString(36).slice(2)}`)
      writeFileSync(file, '0')
      return file
    }

    test(`${PROCESSES} processes x ${INCREMENTS} locked read-modify-writes lose nothing`, async () => {
      const file = counterFile()
      const key = uniqueKey('counter')
      const results = await Promise.all(
        Array.from({ length: PROCESSES }, () => runChild(opened.env, 'count', file, String(INCREMENTS), key)),
      )
      assert.deepEqual(
        results.map((r) => r.timeouts),
        Array(PROCESSES).fill(0),
      )
      assert.equal(Number(readFileSync(file, 'utf8')), PROCESSES * INCREMENTS)
      // Every release was answered before its process closed. On a store with a line, the last
      // one can hand the lock to the place of a process closing that very moment, too late for
      // it to take the lock or give it back: the hand-over lapses unclaimed after its claim
      // window (half a second), never at the TTL (10 s), which a lost release would take.
      await eventually(async () => assert.equal(await lock(key).isLocked(), false, 'every holder released'), 1_000)
    })

    test('process.exit() right after run() resolves leaves the lock free, however the callback ended', async () => {
      for (const ending of ['sync', 'timer', 'throw']) {
        const key = uniqueKey(`exit-${ending}`)
        // Held for a minute unless the release reached the store before the exit.
        const { ran } = await runChild(opened.env, 'run-exit', key, '60000', ending)
        assert.equal(ran, ending !== 'throw')
        const free = await eventually(async () => {
          assert.equal(await store.isLocked(key), false, `${ending}: still held after the exit`)
          return true
        }, 1_000)
        assert.equal(free, true)
      }
    })

    test('serialize() in one process, restoreLock() + extend() + release() in another', async () => {
      const key = uniqueKey('import')
      const { serialized } = await runChild(opened.env, 'take', key, '5000')
      assert.equal(await lock(key).isLocked(), true, 'the first process left it held')
      assert.equal(await lock(key).acquireImmediately(), false)
      const { remaining, released, lockedAfter } = await runChild(opened.env, 'restore', serialized, '60000')
      assert.ok(remaining > 5_000 && remaining <= 60_000, `extend() pushed the expiry out (remaining ${remaining})`)
      assert.equal(released, true)
      assert.equal(lockedAfter, false)
      assert.equal(await lock(key).isLocked(), false)
    })

    test('a holder killed with SIGKILL frees the lock once its TTL passes, not before', async () => {
      const key = uniqueKey('killed')
      const ttl = 1_200
      const { child, result } = await startHolder(opened.env, 'hold', key, String(ttl))
      await killHard(child)
      const l = lock(key, 5_000)
      assert.equal(await l.acquireImmediately(), false, 'held right after the kill')
      assert.ok(await l.acquire({ timeout: 10_000, retryDelay: 20 }), 'free once the TTL passed')
      const freedAfter = Date.now() - result.at
      // The store's clock started the TTL when the holder acquired; allow a little
      // for the two processes' clocks and whole-millisecond rounding.
      assert.ok(freedAfter >= ttl - 50, `freed after ${freedAfter} ms, before the ${ttl} ms TTL`)
      assert.ok(freedAfter < ttl + 2_000 + lapsesLate, `freed only after ${freedAfter} ms`)
      assert.equal(await l.release(), true)
    })

    test("A's stale release after B took the expired lock is a no-op", async () => {
      const key = uniqueKey('report')
      // A, in another process, takes the lock and outlives its TTL.
      const { serialized: a } = await runChild(opened.env, 'take', key, '300')
      await sleep(450 + lapsesLate)
      // B takes the expired lock.
      const b = lock(key, 30_000)
      assert.equal(await b.acquire(), true)
      // A's late release must not free B's lock.
      const { released } = await runChild(opened.env, 'release', a)
      assert.equal(released, false)
      assert.equal(await b.isExpired(), false)
      assert.equal(await lock(key).acquireImmediately(), false, 'nobody else walks in')
      await assert.rejects(restoreLock(a).extend(), { name: 'LockNotHeldError' })
      assert.equal(await b.release(), true)
    })

    test(
      announcesReleases
        ? 'a release in another process is announced: it wakes a waiter here at once, not at its next poll'
        : 'a release in another process is found by the waiter here at its next poll',
      async () => {
        const key = uniqueKey('released-elsewhere')
        const { serialized } = await runChild(opened.env, 'take', key, '30000')
        const waiting = lock(key).acquire({ timeout: 20_000, retryDelay: announcesReleases ? SLOW_POLL.retryDelay : 50 })
        await sleep(500) // the waiter is waiting (and, where releases are announced, listening)
        const released = Date.now()
        assert.equal((await runChild(opened.env, 'release', serialized)).released, true)
        assert.equal(await waiting, true)
        const took = Date.now() - released
        if (announcesReleases) assert.ok(took < 5_000, `woken ${took} ms after the release; the poll alone would take 60000`)
      },
    )
  })
}
