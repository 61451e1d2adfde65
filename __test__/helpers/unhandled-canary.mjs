// Run by runtime/rejections.test.mjs under `node --test`: a test whose promise
// rejection nobody handles. The run must fail because of it.
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

test('passes, but leaves a rejection nobody handles', async () => {
  Promise.reject(new Error('canary: nobody handles this'))
  await sleep(20)
})
