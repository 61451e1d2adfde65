// Hostile and odd input to restoreLock(): 100,000 random and mutated
// serialized locks each give a usable lock or a TypeError, nothing else.
// (Odd keys themselves, huge, with NUL or emoji, ten thousand at once, or
// looking like Lua or SQL, are part of the store contract: stores/contract.mjs.)

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { lock, restoreLock, setLockStore, MemoryLockStore, Lock } from '@shaferllc/keel/core'

/** A small deterministic PRNG, so a failing input can be reproduced from its seed. */
function prng(seed) {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}

const ODD = ['', '\u0000', '\ud800', '\udfff', '🔒', 'é', '\u200b', '\uffff', '"', '\\', '{', '}', ',', ':', '1e400', '-0', 'null']

function randomValue(rand, depth = 0) {
  const pick = Math.floor(rand() * 9)
  switch (pick) {
    case 0:
      return null
    case 1:
      return rand() < 0.5
    case 2:
      return [0, -1, 1e308, -1e308, 2 ** 53, 2 ** 53 - 1, 0.5, 1e-320, 30_000][Math.floor(rand() * 9)]
    case 3:
      return Math.floor(rand() * 1e6) * (rand() < 0.5 ? -1 : 1)
    case 4:
    case 5:
      return Array.from({ length: Math.floor(rand() * 4) }, () => ODD[Math.floor(rand() * ODD.length)]).join('')
    case 6:
      return depth > 2 ? 'deep' : Array.from({ length: Math.floor(rand() * 3) }, () => randomValue(rand, depth + 1))
    default: {
      if (depth > 2) return {}
      const o = {}
      for (const k of ['key', 'ttlMs', 'owner', 'extra']) if (rand() < 0.7) o[k] = randomValue(rand, depth + 1)
      return o
    }
  }
}

function mutate(rand, text) {
  const at = Math.floor(rand() * (text.length + 1))
  switch (Math.floor(rand() * 5)) {
    case 0:
      return text.slice(0, at) // truncated
    case 1:
      return text.slice(0, at) + text.slice(at + 1) // a character dropped
    case 2:
      return text.slice(0, at) + ODD[Math.floor(rand() * ODD.length)] + text.slice(at) // something inserted
    case 3:
      return text.replace(/30000/, ['"30000"', '-1', '0', '1e400', 'null', '9007199254740992', '[]'][Math.floor(rand() * 7)])
    default:
      return text.replace(/"owner":"[^"]*"/, ['"owner":5', '"owner":""', '"owner":null', '"owner":{}'][Math.floor(rand() * 4)])
  }
}

test('restoreLock() of 100,000 random and mutated inputs: a usable lock or a TypeError, nothing else', () => {
  const rand = prng(20261202)
  setLockStore(new MemoryLockStore())
  const valid = lock('import:99', 30_000).serialize().replace('}', ',"owner":"5f0c8e2a-3b1d-4c6e-9a7f-0123456789ab"}')
  let usable = 0
  let refused = 0
  for (let i = 0; i < 100_000; i++) {
    const input = i % 2 === 0 ? mutate(rand, valid) : i % 5 === 1 ? randomValue(rand) : JSON.stringify(randomValue(rand))
    let restored
    try {
      restored = restoreLock(input)
    } catch (e) {
      assert.ok(e instanceof TypeError, `input #${i} ${JSON.stringify(input)} threw ${e}`)
      refused++
      continue
    }
    assert.ok(restored instanceof Lock, `input #${i}`)
    assert.equal(typeof restored.key, 'string')
    assert.ok(restored.ttlMs > 0 && restored.ttlMs <= Number.MAX_SAFE_INTEGER, `input #${i}: ttlMs ${restored.ttlMs}`)
    const again = JSON.parse(restored.serialize())
    assert.equal(again.key, restored.key)
    assert.equal(again.ttlMs, restored.ttlMs)
    usable++
  }
  assert.ok(usable > 1_000 && refused > 1_000, `usable ${usable}, refused ${refused}`)
})
