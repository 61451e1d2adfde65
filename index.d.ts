/**
 * `@shaferllc/keel/core`'s distributed lock: "only one of you may do this at a
 * time", across async tasks, worker threads, processes and machines.
 *
 * ```ts
 * import { lock } from "@shaferllc/keel/core";
 *
 * const [ran] = await lock("invoice:42").run(async () => {
 *   await charge(invoice);
 * });
 * if (!ran) return; // another worker is already charging it
 * ```
 *
 * Two properties make it correct. **Ownership**: every acquisition mints a
 * random owner token, and release/extend only succeed for that owner, so a
 * holder whose TTL ran out cannot free the next holder's lock. **Expiry**: a
 * lock always expires, so a crashed holder cannot block everyone forever.
 *
 * @packageDocumentation
 */

/**
 * The bridge to a lock backend. Implementations must make `acquire` atomic
 * (set-if-absent) and make `release`/`extend` conditional on the owner
 * matching (compare-and-delete, compare-and-extend): a store that can't do
 * both isn't a lock, it's a suggestion.
 *
 * Methods may be `async`, return any promise or thenable, or return plain
 * values. They are looked up on the store at each call and called with the
 * store as `this`. A method that throws or rejects fails the lock operation
 * with that same error; one that answers with the wrong type fails it with a
 * `TypeError` naming the method.
 */
export interface LockStore {
  /** Set `key` to `owner` for `ttlMs` if nobody holds it. Returns whether this owner got it. Must be atomic. */
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean> | boolean
  /** Delete `key` only if `owner` still holds it. Returns whether it did. */
  release(key: string, owner: string): Promise<boolean> | boolean
  /** Push the expiry of `key` out to `ttlMs` from now, only if `owner` still holds it. */
  extend(key: string, owner: string, ttlMs: number): Promise<boolean> | boolean
  /** Whether anyone currently holds `key`. */
  isLocked(key: string): Promise<boolean> | boolean
  /** Milliseconds until `key` expires, or `null` if nobody holds it. */
  remainingTime(key: string): Promise<number | null> | number | null
  /**
   * Optional: the fencing token this store gave `owner` when it acquired
   * `key` (decide it inside `acquire`, from a counter that only grows per key,
   * and keep it with the hold). Called once after each successful acquire;
   * the acquire fails (and the lock is given back) if this throws or answers
   * anything but a non-negative integer, a bigint or null. Stores without it
   * give `null` tokens.
   */
  fencingToken?(key: string, owner: string): Promise<number | bigint | null> | number | bigint | null
  /*
   * Read-write locks (`readLock`, `writeLock`) on a store written in JS: the
   * eight methods below, all of them or none. Their data is the store's own,
   * apart from its plain locks (`lock(k)` and `readLock(k)` never see each
   * other). A key's holds are its readers, or its one writer, each with its
   * own owner token and expiry; a writer refused while others hold the key
   * leaves a mark that keeps new readers out until the writer gets in, calls
   * withdrawWriter, or its TTL passes. Each method must be atomic.
   */
  /** Optional (read-write): hold `key` as a reader for `ttlMs` if no writer holds it or waits for it. */
  acquireRead?(key: string, owner: string, ttlMs: number): Promise<boolean> | boolean
  /**
   * Optional (read-write): hold `key` as its writer for `ttlMs` if nobody (reader or writer)
   * holds it. When refused, mark a writer waiting on `key` for `ttlMs` (keep the later
   * of an existing mark's expiry and this one); getting in clears the mark.
   */
  acquireWrite?(key: string, owner: string, ttlMs: number): Promise<boolean> | boolean
  /** Optional (read-write): end `owner`'s live read or write hold on `key`. Returns whether there was one. */
  releaseHold?(key: string, owner: string): Promise<boolean> | boolean
  /** Optional (read-write): push `owner`'s live hold on `key` out to `ttlMs` from now. Returns whether there was one. */
  extendHold?(key: string, owner: string, ttlMs: number): Promise<boolean> | boolean
  /** Optional (read-write): ms left on `owner`'s hold on `key`, or `null` if it holds none. */
  holdRemaining?(key: string, owner: string): Promise<number | null> | number | null
  /** Optional (read-write): how many hold `key` now: its readers, or 1 for its writer. */
  holders?(key: string): Promise<number> | number
  /** Optional (read-write): whether a reader would be refused now (a writer holds `key` or waits for it). */
  readersWait?(key: string): Promise<boolean> | boolean
  /** Optional (read-write): drop the waiting-writer mark on `key` (a waiting writer gave up). */
  withdrawWriter?(key: string): Promise<unknown> | unknown
}
/** A {@link LockStore} that keeps read-write locks: every optional read-write method present. */
export type ReadWriteLockStore = LockStore &
  Required<
    Pick<
      LockStore,
      'acquireRead' | 'acquireWrite' | 'releaseHold' | 'extendHold' | 'holdRemaining' | 'holders' | 'readersWait' | 'withdrawWriter'
    >
  >

/** How long to wait for a held lock, how often to try again, and whether to keep it alive. */
export interface AcquireOptions {
  /**
   * Give up after this many milliseconds of waiting. A finite number >= 0.
   * Default: 0, don't wait: fail at once if the lock is held. Waiters of one
   * thread are served in arrival order and woken when the lock is released.
   */
  timeout?: number
  /**
   * How often a waiter looks again when no release wakes it (a lock that
   * lapsed at its TTL, a release another client did not announce), in ms.
   * A finite number >= 0. Default: 50.
   */
  retryDelay?: number
  /**
   * Once acquired, extend the lock by its TTL every third of its TTL while it
   * is held, until it is released (a lock you never release is kept forever:
   * release it, or use `run()`). An extension that finds the lock gone aborts
   * {@link Lock.signal}; one the store fails is tried again next time, and the
   * signal aborts if the TTL passes without a success. Its timers do not keep
   * the process alive. Default: false.
   */
  autoExtend?: boolean
  /**
   * Stop waiting when this signal aborts: the acquire rejects at once with
   * `signal.reason` (an `AbortError` `DOMException` when `abort()` was given
   * none), leaves the queue, and `run()` never calls `fn`. A lock granted after
   * the abort is given back at once; a signal aborted already rejects without
   * asking the store. Combines with `timeout`: whichever comes first ends the
   * wait. Once the lock is held, the signal has no effect on it. One signal may
   * serve any number of waits; its listener goes when the last of them ends.
   */
  signal?: AbortSignal
}

/** The result of {@link Lock.run}: `[true, result]` if `fn` ran, `[false, undefined]` if the lock was taken. */
export type RunResult<T> = [ran: true, result: T] | [ran: false, result: undefined]

/**
 * A lock on one key. Create it with {@link lock} or {@link restoreLock}; one
 * handle can be acquired, released and acquired again, each acquisition with
 * a fresh owner token. A handle speaks for its latest acquisition (`release`,
 * `extend`, `signal`, `fencingToken`, `isExpired`, `serialize`); the handle
 * {@link Lock.run} gives its callback speaks for that run's acquisition only.
 */
export declare class Lock {
  private constructor()
  /** The key this lock guards. */
  readonly key: string
  /** How long the lock is held once acquired before it expires on its own, in milliseconds. */
  readonly ttlMs: number
  /** The store this lock was created with (the one set when {@link lock} was called). */
  readonly store: LockStore
  /**
   * Aborts, with a {@link LockNotHeldError} as its `reason`, as soon as the
   * current hold is known to be lost: an `extend()` or autoExtend found it
   * gone, `isExpired()` said so, or its TTL passed without an extension
   * (checked when a timer fires or the property is read, so also right after
   * an event-loop stall). Pass it to `fetch`, drivers and timers inside
   * `run()`. Nothing is thrown asynchronously: the signal is the channel.
   * A handle that holds nothing returns an aborted signal; releasing is not
   * a loss (the released hold's signal is left as it was). Each hold has its
   * own signal, made when first read.
   */
  readonly signal: AbortSignal
  /**
   * The current hold's fencing token: a number that strictly grows per key
   * across every process using the store, also after a lock lapsed (and, for
   * `RedisLockStore` with persistence, after the server restarts). Send it
   * with each write to the resource the lock protects, which refuses a token
   * lower than the highest it has seen: a holder that paused past its TTL
   * cannot overwrite its successor's work. `null` when this handle holds
   * nothing, or for a store without fencing (a JS store may return bigints).
   */
  readonly fencingToken: number | bigint | null

  /**
   * Take the lock, run `fn`, and always release it, even when `fn` throws (its
   * own error propagates, after the release). `fn` receives a `Lock` bound to
   * this acquisition alone, so it can `extend()` it: once that acquisition is
   * lost, its `extend()` rejects and its `release()` resolves `false`, even if
   * this handle has acquired again meanwhile (this handle speaks for its
   * latest acquisition). If the store fails the release itself, `fn`'s outcome
   * still wins (its error, or `[true, result]`) and a `LockReleaseWarning`
   * process warning reports the failure; the lock then lapses at its TTL.
   *
   * Resolves to `[true, result]`, or `[false, undefined]` when someone else
   * holds the lock, in which case `fn` never ran. Doesn't wait unless
   * `options.timeout` says so.
   *
   * ```ts
   * const [ran] = await lock("report").run(() => rebuild(), { timeout: 5_000, retryDelay: 100 });
   * ```
   */
  run<T>(fn: (lock: Lock) => T | PromiseLike<T>, options?: AcquireOptions): Promise<RunResult<Awaited<T>>>
  /** {@link Lock.run} that never waits: if the lock is held, give up at once. */
  runImmediately<T>(fn: (lock: Lock) => T | PromiseLike<T>): Promise<RunResult<Awaited<T>>>
  /**
   * Take the lock, waiting up to `options.timeout` ms for it. Resolves to
   * whether we got it. You own the `try/finally` that releases it: prefer
   * {@link Lock.run}.
   */
  acquire(options?: AcquireOptions): Promise<boolean>
  /** Take the lock only if it is free right now. */
  acquireImmediately(): Promise<boolean>
  /**
   * Give the lock back. Resolves to whether this owner released it: `false`
   * if it was never acquired, already released, or expired (then it may be
   * someone else's, and it is left alone).
   */
  release(): Promise<boolean>
  /**
   * Release the lock if this handle holds it, for `await using` (TypeScript
   * 5.2+): `await using l = lock("report")` releases at the end of the scope,
   * also when it is left by a throw.
   */
  [Symbol.asyncDispose](): Promise<void>
  /**
   * Push the expiry out to `ttlMs` from now (default: this lock's TTL).
   * Rejects with {@link LockNotHeldError} if the lock was lost or never
   * acquired, so you never carry on believing you hold a lock you don't.
   */
  extend(ttlMs?: number): Promise<void>
  /**
   * Whether anyone holds this key (not necessarily us). On a
   * {@link semaphore}: whether every permit is taken (an immediate acquire
   * would fail). On a {@link readLock}: whether a reader would have to wait
   * now (a writer holds it or waits for it); on a {@link writeLock}: whether
   * anyone holds it.
   */
  isLocked(): Promise<boolean>
  /**
   * How many hold this key now: a semaphore's permits; a read-write key's
   * readers, or 1 for its writer; 0 or 1 for a plain lock.
   */
  holders(): Promise<number>
  /**
   * Whether we held this lock and lost it: it expired, `extend()` failed, or
   * `release()` found it gone. The in-memory store also tells when another
   * owner has it now; with a store of your own (which can only say whether
   * *anyone* holds a key) that case reads as not expired.
   */
  isExpired(): Promise<boolean>
  /**
   * Milliseconds until the key expires, or `null` if nobody holds it. On a
   * semaphore or read-write handle: the time left on this handle's own hold,
   * or `null` when it holds none.
   */
  getRemainingTime(): Promise<number | null>
  /**
   * Freeze key, TTL and owner token to a string (`{"key":…,"ttlMs":…,"owner":…}`,
   * the TypeScript Keel format), so another process can {@link restoreLock} it
   * and release or extend the same lock. A semaphore permit adds
   * `"kind":"semaphore"` and its `"limit"`, a read-write hold `"kind":"read"`
   * or `"write"`, so the restored handle is of the same kind.
   */
  serialize(): string
}

/**
 * A lock on `key`, held for `ttlMs` once acquired (default 30_000; the
 * in-memory store counts whole milliseconds, rounding a fraction up). It uses
 * the store registered when it is created.
 *
 * @throws TypeError if `key` is not a (well-formed) string; RangeError/TypeError
 * if `ttlMs` is not a positive finite number.
 */
export declare function lock(key: string, ttlMs?: number): Lock

/**
 * A semaphore: up to `limit` holders of `key` at once, across everything
 * that uses the store. Each acquisition is a permit with its own owner token
 * and expiry (`ttlMs`, default 30_000), so a crashed holder's permit frees at
 * its TTL while the others keep theirs. The handle is a {@link Lock}: `run`,
 * `acquire`, `release`, `extend`, `signal`, `autoExtend` and `await using`
 * work as for a lock; {@link Lock.holders} counts the permits held. Callers
 * that pass different limits for one key are each admitted only while fewer
 * than their own limit are held. Its data never meets `lock(key)`'s.
 *
 * @throws TypeError if `key` is not a (well-formed) string or `limit` not a
 * number; RangeError if `limit` is not a positive safe integer, or `ttlMs`
 * not a positive finite number.
 */
export declare function semaphore(key: string, limit: number, ttlMs?: number): Lock

/**
 * A read hold on `key`: any number of readers at once while no writer holds
 * it. A writer waiting for the key holds back new readers, here and in every
 * other process, so a stream of readers cannot keep it out (a writer that
 * dies while waiting holds nobody back for longer than its TTL).
 */
export declare function readLock(key: string, ttlMs?: number): Lock

/** A write hold on `key`: excludes every reader and every other writer. */
export declare function writeLock(key: string, ttlMs?: number): Lock

/**
 * Rebuild a lock from {@link Lock.serialize}, owner token and all, so this
 * process can release or extend a lock another one took.
 *
 * @throws TypeError if `serialized` is not a serialized lock.
 */
export declare function restoreLock(serialized: string): Lock

/** Register the store `lock()` uses from now on, and return it. */
export declare function setLockStore<S extends LockStore>(store: S): S

/** The store `lock()` uses. */
export declare function getLockStore(): LockStore

/**
 * The default store: in memory, with expiry on a monotonic clock. Per isolate:
 * it coordinates async tasks within one thread of one process and nothing
 * more. Fine for tests and single-process apps; point {@link setLockStore} at
 * Redis for the real thing. Usable directly as a {@link LockStore}.
 */
export declare class MemoryLockStore implements LockStore {
  constructor()
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>
  release(key: string, owner: string): Promise<boolean>
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>
  isLocked(key: string): Promise<boolean>
  remainingTime(key: string): Promise<number | null>
  /** Entries kept in memory, counting expired ones not swept yet (sweeps happen as the store is used). */
  readonly size: number
}

/**
 * What every store on a server ({@link RedisLockStore}, {@link PostgresLockStore},
 * {@link MySqlLockStore}), or on a file ({@link SqliteLockStore}), has: the five
 * operations, each answered by a promise, `ping()` and `close()`. A type for code
 * that checks or closes whichever one it was given.
 */
export interface ServerLockStore extends LockStore {
  /** {@link LockStore.acquire}, always answered by a promise. */
  acquire(key: string, owner: string, ttlMs: number): Promise<boolean>
  /** {@link LockStore.release}, always answered by a promise. */
  release(key: string, owner: string): Promise<boolean>
  /** {@link LockStore.extend}, always answered by a promise. */
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>
  /** {@link LockStore.isLocked}, always answered by a promise. */
  isLocked(key: string): Promise<boolean>
  /** {@link LockStore.remainingTime}, always answered by a promise. */
  remainingTime(key: string): Promise<number | null>
  /**
   * One round trip to the server, opening a connection if none is open:
   * resolves once it answered, rejects with the {@link LockStoreError} an
   * operation would get, within `connectTimeout` when the server cannot be
   * reached.
   */
  ping(): Promise<void>
  /** Close the connections; later operations reject with `ERR_LOCK_STORE_CLOSED`. */
  close(): Promise<void>
}

/** Options of {@link RedisLockStore}. Every field is optional. */
export interface RedisLockStoreOptions {
  /**
   * `redis://[[username]:password@]host[:port][/db]`; username and password
   * log in with Redis ACLs; `rediss://` speaks TLS. Default `redis://127.0.0.1:6379`
   * when `url` is left out. Present but `undefined` (`{ url: process.env.REDIS_URL }`
   * with the variable unset) is a `TypeError`, never the default.
   */
  url?: string
  /** Put before every key in Redis, e.g. `"locks:"`. Default none, as in the docs' ioredis store. */
  prefix?: string
  /** Milliseconds allowed to open (or re-open) the connection. Default 5000. */
  connectTimeout?: number
  /** Milliseconds allowed for a command's answer. Default 5000. */
  commandTimeout?: number
  /** Certificates for a `rediss://` URL (without it, the system's trusted roots check the server). */
  tls?: RedisTlsOptions
  /**
   * A Redis Cluster: the URLs of some of its nodes (the rest are discovered),
   * instead of `url`. Commands go to the master of each key's slot and follow
   * the cluster through resharding and failovers. Present but `undefined` is a
   * `TypeError`, as for `url`.
   */
  cluster?: string[]
}

/** PEM text (string or bytes) for a TLS connection (Redis, PostgreSQL, MySQL). */
export interface RedisTlsOptions {
  /** Trust only this CA (one or more PEM certificates) for the server, instead of the system's roots. */
  ca?: string | Uint8Array
  /** A client certificate (PEM), for a server that asks for one; needs `key`. */
  cert?: string | Uint8Array
  /** The client certificate's private key (PEM); needs `cert`. */
  key?: string | Uint8Array
}

/**
 * The codes on errors a native store rejects with, so callers can branch on
 * them: the server could not be reached (or did not answer as Redis), did not
 * answer in time, answered that it cannot serve anyone yet (Redis loading its
 * data, `BUSY` with a script, out of client slots, a cluster re-forming;
 * PostgreSQL out of connection slots or starting up; etcd without a quorum),
 * refused the credentials, answered with an error (Redis, PostgreSQL, MySQL,
 * SQLite, etcd), the store
 * was closed, or an internal error in the addon (a bug: please report it).
 * A waiter with time left takes `ERR_LOCK_STORE_CONNECTION`,
 * `ERR_LOCK_STORE_TIMEOUT` and `ERR_LOCK_STORE_UNAVAILABLE` as "not yet" and
 * tries again (a JS store's errors with these codes too). Each is on a
 * {@link LockStoreError}; docs/errors.md says what a caller should do with each.
 */
export type LockStoreErrorCode =
  | 'ERR_LOCK_STORE_CONNECTION'
  | 'ERR_LOCK_STORE_TIMEOUT'
  | 'ERR_LOCK_STORE_UNAVAILABLE'
  | 'ERR_LOCK_STORE_AUTH'
  | 'ERR_LOCK_STORE_REDIS'
  | 'ERR_LOCK_STORE_POSTGRES'
  | 'ERR_LOCK_STORE_MYSQL'
  | 'ERR_LOCK_STORE_SQLITE'
  | 'ERR_LOCK_STORE_ETCD'
  | 'ERR_LOCK_STORE_CLOSED'
  | 'ERR_LOCK_INTERNAL'

/**
 * What MemoryLockStore, RedisLockStore, PostgresLockStore, MySqlLockStore,
 * SqliteLockStore and EtcdLockStore reject with when the store failed (bad input stays a `TypeError` or `RangeError`): one class
 * for `import` and `require`, so `instanceof` narrows it. Its `stack` runs
 * through the calls that led to it (the caller's async functions included),
 * whether the store was called directly or through a {@link Lock}. A store
 * written in JS may throw it too; its errors reach the caller as it threw them.
 */
export declare class LockStoreError extends Error {
  /** `code` defaults to `'ERR_LOCK_INTERNAL'`. */
  constructor(message: string, options?: { code?: LockStoreErrorCode; cause?: unknown })
  readonly name: 'LockStoreError'
  /** Which failure; see {@link LockStoreErrorCode}. */
  readonly code: LockStoreErrorCode
}

/**
 * A store on a Redis server, spoken to natively over one multiplexed
 * connection that opens on first use and re-opens by itself after the server
 * comes back. Acquire is `SET key owner PX ttl NX`; release and extend are
 * owner-checked Lua scripts. A release is announced on the Redis channel
 * `keel:released:<key>`, so waiters in other processes retry at once.
 * Wire-compatible with the docs' ioredis store, so processes using either
 * exclude each other. An idle store does not keep the
 * process alive. Usable directly as a {@link LockStore}; failed operations
 * reject with a {@link LockStoreError}, whose `code` is a {@link LockStoreErrorCode}.
 */
export declare class RedisLockStore implements ServerLockStore {
  /**
   * A server's URL, a Redis Cluster's node URLs, or options. With no
   * argument, the default `redis://127.0.0.1:6379`; an argument given as
   * `undefined` (`new RedisLockStore(process.env.REDIS_URL)` with the variable
   * unset) is a `TypeError` naming `url`, never the default, and a type error
   * before that: a `string | undefined` matches none of these signatures
   * (`process.env.REDIS_URL ?? "redis://..."`, or a check, makes it a
   * `string`). Throws `TypeError` for a malformed URL or option.
   */
  constructor()
  constructor(url: string)
  constructor(nodeUrls: string[])
  constructor(options: RedisLockStoreOptions)
  constructor(urlOrOptions: string | string[] | RedisLockStoreOptions)
  /**
   * One round trip (`PING`) to the server (of a Cluster: one of its nodes), opening a connection
   * if none is open: resolves once it answered, rejects with the
   * {@link LockStoreError} an operation would get (`ERR_LOCK_STORE_CONNECTION`,
   * `ERR_LOCK_STORE_AUTH`, `ERR_LOCK_STORE_TIMEOUT`, ...), within `connectTimeout` when
   * the server cannot be reached. For start-up: fail fast on a wrong URL
   * instead of at the first lock's timeout.
   */
  ping(): Promise<void>
  /**
   * Close the connection; later operations, and acquires waiting on this
   * store, reject with `ERR_LOCK_STORE_CLOSED` at once.
   * A store lives until it is closed; once closed it can be garbage-collected.
   */
  close(): Promise<void>
}

/** Its five operations, `ping()` and `close()`: those of every {@link ServerLockStore}, declared once there. */
export interface RedisLockStore extends ServerLockStore {}

/** Options of {@link PostgresLockStore}. Every field is optional. */
export interface PostgresLockStoreOptions {
  /**
   * `postgres://user:password@host:port/database` (any parameter
   * tokio-postgres reads; `?sslmode=require` speaks TLS). Default
   * `postgres://postgres@127.0.0.1:5432/postgres` when `url` is left out.
   * Present but `undefined` (`{ url: process.env.DATABASE_URL }` with the
   * variable unset) is a `TypeError`, never the default.
   */
  url?: string
  /**
   * The lock table: a lower-case name, optionally schema-qualified
   * (`"app.locks"`). Created if missing with the docs' columns, with the
   * sequence `<table>_fencing` beside it. Default `"locks"`.
   */
  table?: string
  /** Connections kept (each opened on first use). An integer from 1 to 100. Default 4. */
  poolSize?: number
  /** Milliseconds allowed to open (or re-open) a connection. Default 5000. */
  connectTimeout?: number
  /** Milliseconds allowed for a statement's answer (also the server's `statement_timeout`). Default 5000. */
  commandTimeout?: number
  /** Expired rows are swept away, in batches, at most this often (ms) while locks are taken. Default 60000. */
  sweepInterval?: number
  /**
   * A direct PostgreSQL URL (read as `url` is) for the one connection that
   * `LISTEN`s for releases, when `url` goes through a pooler in transaction
   * mode (PgBouncer `pool_mode = transaction`), which cannot carry `LISTEN`.
   * Default: `url`. Without it behind such a pooler, waiters find releases
   * by polling every `retryDelay`, and the store emits one `LockStoreWarning`.
   */
  listenUrl?: string
  /** Certificates for TLS (giving this turns TLS on; without `ca`, the system's roots check the server). */
  tls?: RedisTlsOptions
}

/**
 * A store on a PostgreSQL server, spoken to natively over a small pool of
 * connections. The table is the docs' database store's (`key`, `owner`,
 * `expires_at` in epoch ms), so processes using either exclude each other,
 * but every expiry here is decided by the database server's clock, never a
 * client's. Each operation is one prepared statement; fencing tokens come
 * from a sequence in the acquire's own statement; a release is announced
 * with `pg_notify`, so waiters in other processes retry at once. An idle
 * store does not keep the process alive. Failed operations reject with a
 * {@link LockStoreError}, whose `code` is a {@link LockStoreErrorCode}.
 */
export declare class PostgresLockStore implements ServerLockStore {
  /**
   * A `postgres://` URL or options. With no argument, the local server
   * (`postgres://postgres@127.0.0.1:5432/postgres`); an argument, or a `url`
   * option, given as `undefined` (an environment variable that is not set) is
   * a `TypeError` naming `url`, never the default; an argument typed
   * `string | undefined` matches none of these signatures. Throws `TypeError`
   * (or `RangeError`) naming a malformed URL or option.
   */
  constructor()
  constructor(url: string)
  constructor(options: PostgresLockStoreOptions)
  constructor(urlOrOptions: string | PostgresLockStoreOptions)
  /**
   * One round trip (a read of the lock table) to the server, opening a connection
   * if none is open: resolves once it answered, rejects with the
   * {@link LockStoreError} an operation would get (`ERR_LOCK_STORE_CONNECTION`,
   * `ERR_LOCK_STORE_AUTH`, `ERR_LOCK_STORE_TIMEOUT`, ...), within `connectTimeout` when
   * the server cannot be reached. For start-up: fail fast on a wrong URL
   * instead of at the first lock's timeout.
   */
  ping(): Promise<void>
  /**
   * Close the connections; later operations, and acquires waiting on this
   * store, reject with `ERR_LOCK_STORE_CLOSED` at once.
   * A store lives until it is closed; once closed it can be garbage-collected.
   */
  close(): Promise<void>
  /**
   * The SQL that makes every object a store on `table` (default `'locks'`)
   * uses: the table and its sequence (plain locks), the holds table and
   * function (semaphores, read-write locks). A store makes what is missing
   * itself when its user may; for a database whose users may not, run this
   * once as one who may. Throws `TypeError` for a table name the store
   * would refuse.
   */
  static schema(table?: string): string
}

/** Its five operations, `ping()` and `close()`: those of every {@link ServerLockStore}, declared once there. */
export interface PostgresLockStore extends ServerLockStore {}

/** Options of {@link MySqlLockStore}. Every field is optional. */
export interface MySqlLockStoreOptions {
  /**
   * `mysql://user:password@host:port/database`. Query parameters:
   * `ssl-mode` is one of `DISABLED` (no TLS), `PREFERRED` (TLS when the
   * server offers it, else plain text), `REQUIRED`, `VERIFY_CA` and
   * `VERIFY_IDENTITY` (TLS only). Whenever TLS is spoken, the server's
   * certificate is checked, its chain against the trusted CAs (the
   * system's, or `tls.ca`) and the host name, whatever the mode: this store
   * never speaks TLS unchecked. Without `ssl-mode` (and without `tls`), it
   * speaks plain text: a server makes itself a certificate no client can
   * check, and TLS that checks nothing stops no one in the middle, so TLS
   * is spoken where asked for. `socket` is the path of a Unix socket to
   * connect through instead of `host:port` (no TLS there). Default
   * `mysql://root@127.0.0.1:3306/test` when `url` is left out. Present but
   * `undefined` (`{ url: process.env.DATABASE_URL }` with the variable
   * unset) is a `TypeError`, never the default.
   */
  url?: string
  /**
   * The lock table: a lower-case name of letters, digits and underscores,
   * not starting with a digit, optionally database-qualified
   * (`"app.keel_locks"`); at most 50 characters (64 for the database), so
   * the tables `<table>_holds` and `<table>_keys` beside it fit MySQL's
   * limit. Lower case because whether MySQL tells `Locks` from `locks`
   * depends on the server's operating system. Default `"keel_locks"`.
   */
  table?: string
  /** Connections kept (each opened on first use). An integer from 1 to 100. Default 4. */
  poolSize?: number
  /** Milliseconds allowed to open (or re-open) a connection. Default 5000. */
  connectTimeout?: number
  /** Milliseconds allowed for a statement's answer. Default 5000. */
  commandTimeout?: number
  /** Expired rows are swept away, in batches, at most this often (ms) while locks are taken. Default 60000. */
  sweepInterval?: number
  /**
   * Certificates for TLS: `ca` to check the server with instead of the
   * system's roots, `cert` and `key` for a server that asks for a client
   * certificate. Giving it turns TLS on (as `ssl-mode=REQUIRED`) unless
   * `url`'s `ssl-mode` says otherwise (`DISABLED` with it is a `TypeError`).
   */
  tls?: RedisTlsOptions
}

/**
 * A store on a MySQL (or MariaDB) server, spoken to natively over a small
 * pool of connections. Usable directly as a {@link LockStore}; failed
 * operations reject with a {@link LockStoreError}, whose `code` is a
 * {@link LockStoreErrorCode}.
 */
export declare class MySqlLockStore implements ServerLockStore {
  /**
   * A `mysql://` URL or options. With no argument, the local server
   * (`mysql://root@127.0.0.1:3306/test`); an argument, or a `url` option,
   * given as `undefined` (an environment variable that is not set) is a
   * `TypeError` naming `url`, never the default; an argument typed
   * `string | undefined` matches none of these signatures. Throws `TypeError`
   * (or `RangeError`) naming a malformed URL or option; a password in the URL
   * is not repeated in the message.
   */
  constructor()
  constructor(url: string)
  constructor(options: MySqlLockStoreOptions)
  constructor(urlOrOptions: string | MySqlLockStoreOptions)
  /**
   * One round trip (a read of the lock table) to the server, opening a connection
   * if none is open: resolves once it answered, rejects with the
   * {@link LockStoreError} an operation would get (`ERR_LOCK_STORE_CONNECTION`,
   * `ERR_LOCK_STORE_AUTH`, `ERR_LOCK_STORE_TIMEOUT`, ...), within `connectTimeout` when
   * the server cannot be reached. For start-up: fail fast on a wrong URL
   * instead of at the first lock's timeout.
   */
  ping(): Promise<void>
  /**
   * Close the connections; later operations, and acquires waiting on this
   * store, reject with `ERR_LOCK_STORE_CLOSED` at once.
   * A store lives until it is closed; once closed it can be garbage-collected.
   */
  close(): Promise<void>
  /**
   * The SQL that makes every object a store on `table` (default
   * `'keel_locks'`) uses: the table, `<table>_holds` and `<table>_keys`
   * beside it, and the procedure `<table>_hold_<hash>`. For a database
   * whose users may not create them, run it once as one who may, with the
   * `mysql` or `mariadb` client (the procedure comes between `DELIMITER`
   * lines); safe to run again. Named with its database or not, the table
   * gets the same objects. Throws `TypeError` for a table name the store
   * would refuse.
   */
  static schema(table?: string): string
}

/** Its five operations, `ping()` and `close()`: those of every {@link ServerLockStore}, declared once there. */
export interface MySqlLockStore extends ServerLockStore {}

/** Options of {@link SqliteLockStore}. Only `path` is required. */
export interface SqliteLockStoreOptions {
  /**
   * The database file, made if missing (its folder must exist); a relative
   * path is taken from the working directory. Every process that opens the
   * same file shares its locks. Not `":memory:"` nor a `file:` URI.
   */
  path: string
  /**
   * The lock table: a lower-case name of letters, digits and underscores,
   * not starting with a digit, at most 50 characters (`<table>_holds` and
   * `<table>_state` go beside it). Default `"keel_locks"`.
   */
  table?: string
  /**
   * Milliseconds an operation may wait for another process's write to the
   * file to end; past it, it fails with `ERR_LOCK_STORE_TIMEOUT`. Default 5000.
   */
  commandTimeout?: number
  /** Expired rows are deleted at most this often (ms) while locks are taken. Default 60000. */
  sweepInterval?: number
}

/**
 * A store on a SQLite file that the processes of one machine share (cluster
 * workers, a web process and a worker, cron jobs, CLI tools), with no
 * server: locks, semaphores, read-write locks and fencing tokens, as on the
 * server stores. A lock lapses on the machine's monotonic clock, so a
 * wall-clock step never frees one early, and a reboot lets every lock go.
 * Not for several machines (a network filesystem's locking is not safe for
 * SQLite): use a server store there. Usable directly as a {@link LockStore};
 * failed operations reject with a {@link LockStoreError}.
 */
export declare class SqliteLockStore implements ServerLockStore {
  /**
   * Opens the file now. Throws `TypeError` (or `RangeError`) naming a bad
   * option, and a {@link LockStoreError} with code `ERR_LOCK_STORE_SQLITE`
   * naming the path when the folder does not exist, the path is a folder,
   * the file is not a SQLite database (it is left as it was) or cannot be
   * written.
   */
  constructor(path: string)
  constructor(options: SqliteLockStoreOptions)
  constructor(pathOrOptions: string | SqliteLockStoreOptions)
  /** One read of the file: resolves once it answered, rejects as an operation would. */
  ping(): Promise<void>
  /**
   * Close the file; later operations, and acquires waiting on this store,
   * reject with `ERR_LOCK_STORE_CLOSED` at once.
   */
  close(): Promise<void>
}

/** Its five operations, `ping()` and `close()`: those of every {@link ServerLockStore}, declared once there. */
export interface SqliteLockStore extends ServerLockStore {}

/** Options of {@link EtcdLockStore}. Every field is optional. */
export interface EtcdLockStoreOptions {
  /**
   * The members' client URLs (`http://host:port`, or `https://` for TLS; the
   * port defaults to 2379), as an array or one comma-separated string: each
   * call goes to a member that answers, the next one tried when one does not.
   * Default `"http://127.0.0.1:2379"`.
   */
  endpoints?: string | string[]
  /** Put before every key the store writes, so several apps can share a cluster. Default `"keel:"`. */
  prefix?: string
  /** A user to log in as (etcd's authentication); its role needs read and write on the prefix. */
  username?: string
  /** The user's password; it never appears in an error message. */
  password?: string
  /** Milliseconds to open a connection to a member (each one tried). Default 5000. */
  connectTimeout?: number
  /** Milliseconds a call may take, across the members it is sent to. Default 5000. */
  commandTimeout?: number
  /** TLS for `https://` endpoints: PEM `ca` (else the system's roots), and `cert` with `key` for a client certificate. */
  tls?: RedisTlsOptions
}

/**
 * A store on an etcd cluster: every lock, permit and reader is a key the
 * cluster's majority commits before the store answers, so a lock granted
 * stays granted through the failure of any minority of members, the leader
 * included, and a member cut off from the majority refuses rather than
 * grants (`ERR_LOCK_STORE_UNAVAILABLE`). A hold lapses at its TTL, let go by
 * the store that took it; the hold of a process that died lapses with its
 * lease, which the cluster counts in whole seconds: no sooner than its TTL,
 * and up to about two seconds after it (a thirtieth of a TTL longer than a
 * minute). Fencing tokens are the revisions that created
 * the keys. Usable directly as a {@link LockStore}; failed operations reject
 * with a {@link LockStoreError}.
 */
export declare class EtcdLockStore implements ServerLockStore {
  /**
   * Reads the options now (no connection opens until the first operation).
   * Throws `TypeError` (or `RangeError`) naming a bad option, an endpoint
   * that is not an `http` or `https` URL among them.
   */
  constructor()
  constructor(endpoints: string | string[])
  constructor(options: EtcdLockStoreOptions)
  constructor(urlOrOptions: string | string[] | EtcdLockStoreOptions)
  /**
   * One linearizable read: resolves once a member with a quorum behind it
   * answered, rejects as an operation would.
   */
  ping(): Promise<void>
  /**
   * Close the connections; later operations, and acquires waiting on this
   * store, reject with `ERR_LOCK_STORE_CLOSED` at once.
   */
  close(): Promise<void>
}

/** Its five operations, `ping()` and `close()`: those of every {@link ServerLockStore}, declared once there. */
export interface EtcdLockStore extends ServerLockStore {}

/** Thrown by {@link Lock.extend} when the lock has expired, was released, or was never acquired. */
export declare class LockNotHeldError extends Error {
  constructor(key?: string)
  readonly name: 'LockNotHeldError'
  /** The key of the lock that is not held (`''` when it was made without one). */
  readonly key: string
}

/** Options for {@link verifyLockStore}. */
export interface VerifyLockStoreOptions {
  /** Put before every key the checks use. Default: `keel-verify:<random>:`, so runs never collide. */
  prefix?: string
  /**
   * The TTL (ms) the expiry checks use. An integer >= 50. Default 300. They wait
   * `floor(ttlMs / 3) + ttlMs + 100` ms in all (500 at the default), and
   * `floor(ttlMs / 3) + 2 * ttlMs + 200` ms more for a store with the read-write
   * methods (900 at the default); the rest of a run is the store's own answers.
   */
  ttlMs?: number
  /** How many owners race for one key in the atomicity check. An integer >= 2. Default 20. */
  racers?: number
  /** How many times the race is run, each on a fresh key. An integer >= 1. Default 5. */
  rounds?: number
  /** How long one store call may take before it counts as "no answer", in ms. Default 5000. */
  callTimeout?: number
}

/** One check of {@link verifyLockStore}: what was checked, whether it held, and what was seen. */
export interface LockStoreCheck {
  name: string
  ok: boolean
  detail: string
}

/** What {@link verifyLockStore} found: `ok` when every check held. */
export interface LockStoreReport {
  ok: boolean
  checks: LockStoreCheck[]
}

/**
 * Check a store against what the lock relies on, by calling its methods:
 * acquire is an atomic set-if-absent (owners racing for one key, several
 * rounds), release and extend act only for the owner, the TTL is honoured,
 * `remainingTime` is null and `isLocked` false once nobody holds a key.
 * Resolves to a report; it never throws for a failing store (a method that
 * throws, rejects, answers the wrong type or never answers fails its check).
 * Run it with real timers, against the real backend.
 *
 * @throws TypeError (rejected) if `store` is not an object, or an option is unknown or malformed.
 */
export declare function verifyLockStore(store: LockStore, options?: VerifyLockStoreOptions): Promise<LockStoreReport>

/**
 * The `node:diagnostics_channel` names the lock publishes on. `acquire`, `run`,
 * `release` and `extend` are tracing channels (`diagnostics_channel.tracingChannel(name)`):
 * each operation publishes one context object on `start`, `end`, then `asyncStart` and
 * `asyncEnd` (and `error` before them when it rejects), with `result` or `error` set on it
 * as Node's `tracePromise` does. `lost` is a plain channel: one {@link LockLostMessage}
 * per hold known to be lost. With nobody subscribed nothing is built or published.
 * No context carries the owner token.
 */
export declare const channels: {
  /** Every acquisition attempt of a handle: `acquire()`, `acquireImmediately()`, and the one in `run()`. */
  readonly acquire: 'keel:lock:acquire'
  /** A whole `run()`, the callback included. */
  readonly run: 'keel:lock:run'
  /** A release: `release()`, and the one that ends `run()`. */
  readonly release: 'keel:lock:release'
  /** An extension: `extend()`, and `autoExtend`'s. */
  readonly extend: 'keel:lock:extend'
  /** A hold known to be lost. */
  readonly lost: 'keel:lock:lost'
}

/** What every traced context and lost message says of its lock. */
export interface LockTraceFields {
  key: string
  kind: 'lock' | 'semaphore' | 'read' | 'write'
  /** A semaphore's number of permits; null for the other kinds. */
  limit: number | null
  /** The store's constructor name: `'MemoryLockStore'`, `'RedisLockStore'`, or your store's class. */
  store: string
  /** The lock's TTL; for an extension, the TTL it extends by. */
  ttlMs: number
}

/** The context of a traced operation: what the tracing channel's events carry. */
export interface LockTraceContext<Result> extends LockTraceFields {
  /** Set before `asyncStart` when it resolved. */
  result?: Result
  /** Set before `error` when it rejected. */
  error?: unknown
}

/** `channels.acquire`'s context; `result` is whether it got the lock. */
export interface AcquireTraceContext extends LockTraceContext<boolean> {
  /** The acquire's `timeout` option (0: it does not wait). */
  timeoutMs: number
  /** ms from the call to the answer; set before `asyncStart` (and `error`). */
  waitedMs: number
  /** Acquire requests it sent the store (a lock handed to it from a store's line adds none); set before `asyncStart`. */
  attempts: number
  /** The acquisition's fencing token, or null (refused, or a store that gives none); set before `asyncStart`. */
  fencingToken: number | bigint | null
}

/** `channels.run`'s context; `result` is what `run()` resolves to. */
export interface RunTraceContext extends LockTraceContext<RunResult<unknown>> {
  /** The run's `timeout` option. */
  timeoutMs: number
}

/** `channels.release`'s context; `result` is whether the store released it. */
export interface ReleaseTraceContext extends LockTraceContext<boolean> {
  /**
   * ms from the acquisition to this release, or null when unknown here (a
   * handle from `restoreLock()`, or a lock taken while nobody listened to `release`).
   */
  heldMs: number | null
}

/**
 * `channels.extend`'s context; `ttlMs` is the extension's; `result` is whether
 * the store extended it: `true` for an `extend()` (one that did not extend
 * rejects, with its {@link LockNotHeldError} as `error`), `false` for an
 * `autoExtend` extension the store refused.
 */
export interface ExtendTraceContext extends LockTraceContext<boolean> {}

/**
 * How a hold was found lost: an extension refused (`extend`, `autoExtend`);
 * its time up by this process's clock (`expired`: its TTL passed with no
 * extension, which holds taken while someone listens to `channels.lost` are
 * watched for); `isExpired()` finding it gone; a release finding it gone.
 */
export type LockLostReason = 'extend' | 'autoExtend' | 'expired' | 'isExpired' | 'release'

/** What `channels.lost` publishes, once per hold known to be lost. */
export interface LockLostMessage extends LockTraceFields {
  reason: LockLostReason
}

declare global {
  // Node 20 defines Symbol.asyncDispose; declared here too so the types need
  // neither @types/node nor lib "esnext.disposable" (as @types/node does).
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol
  }
  // Node's (or the DOM's) AbortSignal: what this package's API relies on,
  // declared the way both declare it, so it merges with theirs where they are
  // loaded and stands alone where neither is.
  interface AbortSignal {
    /** Whether the signal has aborted (for {@link Lock.signal}: the hold is known lost). */
    readonly aborted: boolean
    /** Why it aborted: for {@link Lock.signal}, a {@link LockNotHeldError}. */
    readonly reason: any
    /** Throws {@link AbortSignal.reason} if the signal has aborted. */
    throwIfAborted(): void
  }
}
