// The public union of error codes is the addon's list (`Code` in
// src/error.rs, generated into lib/native.d.ts as `ErrorCode`): a code added
// to or removed from one and not the other fails to compile here.
import type { LockStoreErrorCode } from '@shaferllc/keel/core'
import type { ErrorCode } from '../../lib/native.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
const assertType = <T extends true>(_: T) => {}

assertType<Equal<LockStoreErrorCode, `${ErrorCode}`>>(true)
// @ts-expect-error one code more is told apart
assertType<Equal<LockStoreErrorCode, `${ErrorCode}` | 'ERR_LOCK_STORE_NOPE'>>(true)
// @ts-expect-error one code fewer too
assertType<Equal<LockStoreErrorCode, Exclude<`${ErrorCode}`, 'ERR_LOCK_INTERNAL'>>>(true)
