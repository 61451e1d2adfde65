// Compiled by `tsc --noEmit` in `npm test`: every public API, typed as users
// write it. The @ts-expect-error lines are misuse that must not compile.
import diagnostics from 'node:diagnostics_channel'
import {
  lock,
  semaphore,
  readLock,
  writeLock,
  restoreLock,
  setLockStore,
  getLockStore,
  MemoryLockStore,
  RedisLockStore,
  PostgresLockStore,
  MySqlLockStore,
  SqliteLockStore,
  EtcdLockStore,
  LockNotHeldError,
  LockStoreError,
  Lock,
  channels,
  type AcquireTraceContext,
  type RunTraceContext,
  type ReleaseTraceContext,
  type ExtendTraceContext,
  type LockLostMessage,
  type LockLostReason,
  type LockStore,
  type ServerLockStore,
  type AcquireOptions,
  type RunResult,
  type RedisLockStoreOptions,
  type RedisTlsOptions,
  type PostgresLockStoreOptions,
  type MySqlLockStoreOptions,
  type SqliteLockStoreOptions,
  type EtcdLockStoreOptions,
  type LockStoreReport,
  type ReadWriteLockStore,
  type LockStoreCheck,
  verifyLockStore,
  type LockStoreErrorCode,
} from '@shaferllc/keel/core'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
const assertType = <T extends true>(_: T) => {}

export async function manyHolders(): Promise<void> {
  const exports: Lock = semaphore('exports', 3, 60_000)
  const [ran, n] = await exports.run(async () => 1)
  assertType<Equal<typeof n, number | undefined>>(true)
  void ran
  const held: number = await exports.holders()
  const full: boolean = await exports.isLocked()
  const price: Lock = readLock('price-list')
  const rebuild: Lock = writeLock('price-list', 5_000)
  await using reading = readLock('price-list')
  await reading.acquire({ timeout: 100, autoExtend: true })
  const token: number | bigint | null = rebuild.fencingToken
  void [held, full, price, token]
  // @ts-expect-error a semaphore needs its limit
  semaphore('exports')
  // @ts-expect-error the limit is a number
  semaphore('exports', '3')
  // @ts-expect-error a read lock takes no limit
  readLock('k', 1, 2)
}

export async function everyApi(invoice: { id: number }): Promise<void> {
  const charge = async (i: { id: number }) => ({ charged: i.id })

  const [ran, result] = await lock('invoice:42').run(() => charge(invoice))
  if (ran) {
    assertType<Equal<typeof result, { charged: number }>>(true)
  } else {
    assertType<Equal<typeof result, undefined>>(true)
  }

  const [ranSync, n] = await lock('k').run(() => 42)
  assertType<Equal<typeof n, number | undefined>>(true)
  void ranSync

  const waited: RunResult<void> = await lock('report').run(async () => {}, { timeout: 5_000, retryDelay: 100 })
  void waited
  await lock('report').runImmediately(() => 'now')

  lock('invoice:42')
  lock('nightly-report', 300_000)

  await lock('import', 60_000).run(async (l) => {
    assertType<Equal<typeof l, Lock>>(true)
    for (const batch of [1, 2]) {
      void batch
      await l.extend()
    }
    await l.extend(60_000)
  })

  const l = lock('invoice:42')
  if (!(await l.acquire({ timeout: 2_000 }))) return
  try {
    await charge(invoice)
  } finally {
    const released: boolean = await l.release()
    void released
  }
  const now: boolean = await l.acquireImmediately()
  void now

  const a = lock('import:99', 60_000)
  await a.acquire()
  const serialized: string = a.serialize()
  const b = restoreLock(serialized)
  await b.extend(60_000)
  await b.release()

  const locked: boolean = await l.isLocked()
  const expired: boolean = await l.isExpired()
  const left: number | null = await l.getRemainingTime()
  void [locked, expired, left, l.key, l.ttlMs, l.store]

  const options: AcquireOptions = { timeout: 1, retryDelay: 2 }
  await l.acquire(options)

  const memory = setLockStore(new MemoryLockStore())
  // @ts-expect-error a memory store has no server to ping
  void memory.ping
  // Any store on a server, for code that checks or closes whichever it is given.
  const startUp = async (store: ServerLockStore) => {
    await store.ping()
    return store
  }
  const servers: ServerLockStore[] = [new RedisLockStore(), new PostgresLockStore(), new MySqlLockStore(), new SqliteLockStore('locks.db')]
  assertType<Equal<Awaited<ReturnType<typeof startUp>>, ServerLockStore>>(true)
  void servers
  // Each class has the five operations, typed once in LockStore.
  const sqlite = new SqliteLockStore('locks.db')
  assertType<Equal<Parameters<SqliteLockStore['acquire']>, [key: string, owner: string, ttlMs: number]>>(true)
  assertType<Equal<ReturnType<MySqlLockStore['remainingTime']>, Promise<number | null>>>(true)
  assertType<Equal<ReturnType<PostgresLockStore['isLocked']>, Promise<boolean>>>(true)
  assertType<Equal<ReturnType<RedisLockStore['extend']>, Promise<boolean>>>(true)
  const released: Promise<boolean> = sqlite.release('k', 'o')
  void released
  // @ts-expect-error release takes the owner
  void sqlite.release('k')
  // @ts-expect-error the memory store is no server store
  void startUp(memory)
  assertType<Equal<typeof memory, MemoryLockStore>>(true)
  const size: number = memory.size
  void size
  const current: LockStore = getLockStore()
  void current

  try {
    await l.extend()
  } catch (e) {
    if (e instanceof LockNotHeldError) {
      const name: 'LockNotHeldError' = e.name
      const key: string = e.key
      void [name, key]
    }
  }

  // @ts-expect-error a key is a string
  lock(42)
  // @ts-expect-error the TTL is a number
  lock('k', '30s')
  // @ts-expect-error the options are named
  await l.acquire(5_000)
  // @ts-expect-error run needs a callback
  await l.run()
  // @ts-expect-error a store needs all five methods
  setLockStore({ acquire: async () => true })
  // @ts-expect-error a Lock comes from lock() or restoreLock()
  new Lock()
  // @ts-expect-error restoreLock takes the serialized string
  restoreLock({ key: 'k', ttlMs: 1 })
}

/** A store written as a class, with synchronous methods. */
export class SyncStore implements LockStore {
  private held = new Map<string, string>()
  acquire(key: string, owner: string): boolean {
    if (this.held.has(key)) return false
    this.held.set(key, owner)
    return true
  }
  release(key: string, owner: string): boolean {
    return this.held.get(key) === owner && this.held.delete(key)
  }
  extend(key: string, owner: string): boolean {
    return this.held.get(key) === owner
  }
  isLocked(key: string): boolean {
    return this.held.has(key)
  }
  remainingTime(key: string): number | null {
    return this.held.has(key) ? 1 : null
  }
}
setLockStore(new SyncStore())

/** A store that keeps read-write locks: the eight methods, typed by ReadWriteLockStore. */
export const readWriteStore: ReadWriteLockStore = {
  acquire: (key, owner, ttlMs) => ttlMs > 0 && key !== owner,
  release: async () => true,
  extend: () => true,
  isLocked: () => false,
  remainingTime: () => null,
  acquireRead: async (key: string, owner: string, ttlMs: number) => key.length + owner.length + ttlMs > 0,
  acquireWrite: () => false,
  releaseHold: async () => false,
  extendHold: () => true,
  holdRemaining: async () => null,
  holders: () => 0,
  readersWait: async () => false,
  withdrawWriter: async () => undefined,
}
setLockStore(readWriteStore)
assertType<Equal<Parameters<NonNullable<LockStore['acquireWrite']>>, [key: string, owner: string, ttlMs: number]>>(true)
// @ts-expect-error a read-write store needs all eight read-write methods
export const missingOne: ReadWriteLockStore = { ...readWriteStore, withdrawWriter: undefined }
// @ts-expect-error holders answers a number
export const wrongAnswer: LockStore = { ...readWriteStore, holders: () => 'two' }

/** What `process.env.X` is typed as. */
declare const maybeUrl: string | undefined

export async function redisStore(): Promise<void> {
  const byUrl = new RedisLockStore('redis://app:secret@127.0.0.1:6379/1')
  const options: RedisLockStoreOptions = { prefix: 'locks:', commandTimeout: 2_000 }
  const store = setLockStore(new RedisLockStore(options))
  assertType<Equal<typeof store, RedisLockStore>>(true)
  assertType<Equal<ReturnType<RedisLockStore['ping']>, Promise<void>>>(true)
  await byUrl.ping()
  const asStore: LockStore = byUrl
  await asStore.acquire('k', 'owner', 1000)
  const closed: Promise<void> = store.close()
  await closed
  const code: LockStoreErrorCode = 'ERR_LOCK_STORE_TIMEOUT'
  const internal: LockStoreErrorCode = 'ERR_LOCK_INTERNAL'
  // @ts-expect-error not a code the stores use
  const unknownCode: LockStoreErrorCode = 'ERR_LOCK_STORE_NOPE'
  void [code, internal, unknownCode]
  new RedisLockStore()
  // @ts-expect-error a port is not a URL
  new RedisLockStore(6379)
  // @ts-expect-error a URL that may be undefined (an unset environment variable) is not a URL
  new RedisLockStore(maybeUrl)
  new RedisLockStore(maybeUrl ?? 'redis://127.0.0.1:6379')
  new RedisLockStore(Math.random() > 0.5 ? 'redis://h:6379' : { prefix: 'locks:' })
  // @ts-expect-error misspelt option
  new RedisLockStore({ urll: 'redis://x' })
  // @ts-expect-error timeouts are numbers of milliseconds
  new RedisLockStore({ commandTimeout: '2s' })
  const tls: RedisTlsOptions = { ca: '-----BEGIN CERTIFICATE-----', cert: new Uint8Array(), key: Buffer.from('') }
  new RedisLockStore({ url: 'rediss://redis.internal:6380', tls })
  new RedisLockStore(['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000'])
  new RedisLockStore({ cluster: ['redis://10.0.0.1:7000'], prefix: 'locks:' })
  // @ts-expect-error cluster nodes are URLs
  new RedisLockStore({ cluster: [7000] })
  // @ts-expect-error no switch to skip certificate checks
  new RedisLockStore({ url: 'rediss://x', tls: { rejectUnauthorized: false } })
}

export async function postgresStore(): Promise<void> {
  const byUrl = new PostgresLockStore('postgres://app:secret@db.internal:5432/orders')
  const options: PostgresLockStoreOptions = { table: 'app.locks', poolSize: 2, commandTimeout: 2_000, sweepInterval: 30_000 }
  const store = setLockStore(new PostgresLockStore(options))
  assertType<Equal<typeof store, PostgresLockStore>>(true)
  assertType<Equal<ReturnType<PostgresLockStore['ping']>, Promise<void>>>(true)
  await byUrl.ping()
  const asStore: LockStore = byUrl
  await asStore.acquire('k', 'owner', 1000)
  const closed: Promise<void> = store.close()
  await closed
  const code: LockStoreErrorCode = 'ERR_LOCK_STORE_POSTGRES'
  void code
  try {
    await store.acquire('k', 'owner', 1000)
  } catch (e) {
    // A store's failure narrows with instanceof, no cast: its code is a LockStoreErrorCode.
    if (e instanceof LockStoreError) {
      assertType<Equal<typeof e.code, LockStoreErrorCode>>(true)
      const name: 'LockStoreError' = e.name
      const message: string = e.message
      if (e.code === 'ERR_LOCK_STORE_TIMEOUT' || e.code === 'ERR_LOCK_STORE_CONNECTION') void [name, message]
      // @ts-expect-error not a code the stores use
      if (e.code === 'ERR_LOCK_STORE_NOPE') void 0
    } else if (e instanceof TypeError) {
      void e.message
    }
  }
  // A store written in JS may throw one too.
  const own = new LockStoreError('the cache is down', { code: 'ERR_LOCK_STORE_CONNECTION', cause: new Error('ECONNRESET') })
  const plain: Error = new LockStoreError('no code: ERR_LOCK_INTERNAL')
  void [own, plain]
  // @ts-expect-error the code is one of LockStoreErrorCode
  new LockStoreError('x', { code: 'ERR_SOMETHING' })
  // @ts-expect-error code is read-only
  own.code = 'ERR_LOCK_STORE_CLOSED'
  const ddl: string = PostgresLockStore.schema('app.locks')
  const defaultDdl: string = PostgresLockStore.schema()
  void [ddl, defaultDdl]
  // @ts-expect-error a table is a name
  PostgresLockStore.schema(42)
  new PostgresLockStore()
  // @ts-expect-error a URL that may be undefined (an unset environment variable) is not a URL
  new PostgresLockStore(maybeUrl)
  new PostgresLockStore(Math.random() > 0.5 ? 'postgres://db/app' : { table: 'locks' })
  new PostgresLockStore({ url: 'postgres://db/app', tls: { ca: '-----BEGIN CERTIFICATE-----' } })
  // @ts-expect-error a port is not a URL
  new PostgresLockStore(5432)
  // @ts-expect-error misspelt option
  new PostgresLockStore({ tabel: 'locks' })
  // @ts-expect-error the pool size is a number
  new PostgresLockStore({ poolSize: '4' })
  // @ts-expect-error a Redis option
  new PostgresLockStore({ prefix: 'locks:' })
}

export async function sqliteStore(): Promise<void> {
  const byPath = new SqliteLockStore('/var/lib/app/locks.db')
  const options: SqliteLockStoreOptions = { path: 'locks.db', table: 'job_locks', commandTimeout: 2_000, sweepInterval: 30_000 }
  const store = setLockStore(new SqliteLockStore(options))
  assertType<Equal<typeof store, SqliteLockStore>>(true)
  assertType<Equal<ReturnType<SqliteLockStore['ping']>, Promise<void>>>(true)
  const asStore: LockStore = byPath
  await asStore.acquire('k', 'owner', 1000)
  const closed: Promise<void> = store.close()
  await closed
  new SqliteLockStore(Math.random() > 0.5 ? 'a.db' : { path: 'b.db' })
  // @ts-expect-error the path is required
  new SqliteLockStore()
  // @ts-expect-error an options object names its path
  new SqliteLockStore({ table: 'locks' })
  // @ts-expect-error a path that may be undefined (an unset environment variable) is not a path
  new SqliteLockStore(maybeUrl)
  // @ts-expect-error misspelt option
  new SqliteLockStore({ path: 'locks.db', tabel: 'locks' })
  // @ts-expect-error a server store's option
  new SqliteLockStore({ path: 'locks.db', poolSize: 4 })
  // @ts-expect-error timeouts are numbers of milliseconds
  new SqliteLockStore({ path: 'locks.db', commandTimeout: '2s' })
}

export async function etcdStore(): Promise<void> {
  const local = new EtcdLockStore()
  const listed = new EtcdLockStore('http://10.0.0.1:2379,http://10.0.0.2:2379')
  const options: EtcdLockStoreOptions = {
    endpoints: ['https://etcd-0:2379', 'https://etcd-1:2379', 'https://etcd-2:2379'],
    prefix: 'billing:',
    username: 'locks',
    password: 'secret',
    connectTimeout: 2_000,
    commandTimeout: 3_000,
    tls: { ca: 'PEM' },
  }
  const store = setLockStore(new EtcdLockStore(options))
  assertType<Equal<typeof store, EtcdLockStore>>(true)
  assertType<Equal<ReturnType<EtcdLockStore['ping']>, Promise<void>>>(true)
  assertType<Equal<Parameters<EtcdLockStore['acquire']>, [key: string, owner: string, ttlMs: number]>>(true)
  const asStore: LockStore = listed
  const asServer: ServerLockStore = local
  await asStore.acquire('k', 'owner', 1000)
  await asServer.ping()
  new EtcdLockStore(['http://a:2379', 'http://b:2379'])
  // @ts-expect-error a number is not an endpoint
  new EtcdLockStore({ endpoints: 2379 })
  // @ts-expect-error an unknown option
  new EtcdLockStore({ url: 'http://a:2379' })
  await store.close()
}

export async function mysqlStore(): Promise<void> {
  const byUrl = new MySqlLockStore('mysql://app:secret@db.internal:3306/orders?ssl-mode=VERIFY_IDENTITY')
  const options: MySqlLockStoreOptions = { table: 'app.keel_locks', poolSize: 2, commandTimeout: 2_000, sweepInterval: 30_000 }
  const store = setLockStore(new MySqlLockStore(options))
  assertType<Equal<typeof store, MySqlLockStore>>(true)
  assertType<Equal<ReturnType<MySqlLockStore['ping']>, Promise<void>>>(true)
  await byUrl.ping()
  const asStore: LockStore = byUrl
  await asStore.acquire('k', 'owner', 1000)
  const left: number | null = await store.remainingTime('k')
  const closed: Promise<void> = store.close()
  await closed
  void left
  const ddl: string = MySqlLockStore.schema('app.keel_locks')
  const defaultDdl: string = MySqlLockStore.schema()
  void [ddl, defaultDdl]
  // @ts-expect-error a table is a name
  MySqlLockStore.schema(42)
  new MySqlLockStore()
  // @ts-expect-error a URL that may be undefined (an unset environment variable) is not a URL
  new MySqlLockStore(maybeUrl)
  new MySqlLockStore(Math.random() > 0.5 ? 'mysql://root@db/app' : { table: 'locks' })
  new MySqlLockStore({ url: 'mysql://app@localhost/app?socket=/run/mysqld/mysqld.sock', connectTimeout: 1_000 })
  new MySqlLockStore({ url: 'mysql://db/app?ssl-mode=VERIFY_CA', tls: { ca: '-----BEGIN CERTIFICATE-----', cert: new Uint8Array(), key: Buffer.from('') } })
  // @ts-expect-error a port is not a URL
  new MySqlLockStore(3306)
  // @ts-expect-error misspelt option
  new MySqlLockStore({ tabel: 'keel_locks' })
  // @ts-expect-error the pool size is a number
  new MySqlLockStore({ poolSize: '4' })
  // @ts-expect-error timeouts are numbers of milliseconds
  new MySqlLockStore({ commandTimeout: '2s' })
  // @ts-expect-error a Redis option
  new MySqlLockStore({ prefix: 'locks:' })
  // @ts-expect-error a PostgresLockStore option
  new MySqlLockStore({ listenUrl: 'mysql://db/app' })
  // @ts-expect-error no switch to skip certificate checks (ssl-mode in the URL says that)
  new MySqlLockStore({ tls: { rejectUnauthorized: false } })
  // @ts-expect-error one URL, not a list of servers
  new MySqlLockStore(['mysql://a/app', 'mysql://b/app'])
}

export async function signals(): Promise<void> {
  const l = lock('k', 1_000)
  const signal: AbortSignal = l.signal
  const [ran, text] = await l.run(
    async (held) => {
      const response: Promise<string> = new Promise((resolve, reject) => {
        held.signal.addEventListener('abort', () => reject(held.signal.reason))
        resolve('ok')
      })
      return response
    },
    { timeout: 5_000, autoExtend: true },
  )
  assertType<Equal<typeof text, string | undefined>>(true)
  void [signal, ran]
  await l.acquire({ autoExtend: false })
  // @ts-expect-error autoExtend is a boolean
  await l.acquire({ autoExtend: 'yes' })
  // @ts-expect-error signal is read-only
  l.signal = new AbortController().signal
  const aborted: boolean = l.signal.aborted
  l.signal.throwIfAborted()
  const error = new LockNotHeldError()
  const key: string = error.key
  void [aborted, key]
  // @ts-expect-error run() options are checked: a misspelt one is an error
  await l.run(() => 1, { timeot: 1_000 })
}

export async function verifying(): Promise<void> {
  const report: LockStoreReport = await verifyLockStore(new MemoryLockStore(), { ttlMs: 200, racers: 10 })
  const first: LockStoreCheck | undefined = report.checks[0]
  const ok: boolean = report.ok && (first?.ok ?? false)
  void ok
  // @ts-expect-error a store has the five methods
  await verifyLockStore({ acquire: async () => true })
  // @ts-expect-error unknown option
  await verifyLockStore(new MemoryLockStore(), { ttl: 200 })
}

export async function fencing(): Promise<void> {
  const l = lock('k')
  const token: number | bigint | null = l.fencingToken
  void token
  class Fenced implements LockStore {
    acquire = async (_k: string, _o: string, _t: number) => true
    release = async () => true
    extend = async () => true
    isLocked = async () => false
    remainingTime = async () => null
    fencingToken = async (_k: string, _o: string): Promise<bigint> => 1n
  }
  setLockStore(new Fenced())
  // @ts-expect-error a fencing token is a number, bigint or null
  const wrong: LockStore = { ...new Fenced(), fencingToken: async () => 'seven' }
  void wrong
  // @ts-expect-error read-only
  l.fencingToken = 3
}

export async function cancelling(): Promise<void> {
  const controller = new AbortController()
  const options: AcquireOptions = { timeout: 5_000, signal: controller.signal }
  const got: boolean = await lock('k').acquire(options)
  const [ran] = await lock('k').run(() => 1, { timeout: 1_000, signal: AbortSignal.timeout(500) })
  void [got, ran]
  // @ts-expect-error a signal is an AbortSignal, not its controller
  await lock('k').acquire({ signal: controller })
}

export function tracing(): void {
  const acquire: 'keel:lock:acquire' = channels.acquire
  const names: string[] = [channels.run, channels.release, channels.extend, channels.lost]
  void [acquire, names]
  diagnostics.tracingChannel<unknown, AcquireTraceContext>(channels.acquire).subscribe({
    start(c) {
      const key: string = c.key
      const kind: 'lock' | 'semaphore' | 'read' | 'write' = c.kind
      const limit: number | null = c.limit
      const store: string = c.store
      const timeoutMs: number = c.timeoutMs
      void [key, kind, limit, store, timeoutMs]
    },
    end() {},
    asyncStart() {},
    asyncEnd(c) {
      const got: boolean | undefined = c.result
      const waited: number = c.waitedMs
      const attempts: number = c.attempts
      const token: number | bigint | null = c.fencingToken
      void [got, waited, attempts, token]
      // @ts-expect-error no context carries the owner token
      void c.owner
    },
    error(c) {
      const why: unknown = c.error
      void why
    },
  })
  const run = (c: RunTraceContext): RunResult<unknown> | undefined => c.result
  const held = (c: ReleaseTraceContext): number | null => c.heldMs
  const extended = (c: ExtendTraceContext): boolean | undefined => c.result
  diagnostics.subscribe(channels.lost, (message) => {
    const lost = message as LockLostMessage
    const reason: LockLostReason = lost.reason
    void reason
  })
  // @ts-expect-error the channel names are read-only
  channels.lost = 'mine'
  void [run, held, extended]
}
