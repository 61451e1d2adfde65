// Every example in the README's API and Stores sections runs as written
// (the Redis ones against a redis-server the test starts, the PostgreSQL
// ones against a cluster of its own).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

import { redisForTests } from '../../support/servers.mjs'
import { postgresForTests } from '../../support/postgres.mjs'

const run = promisify(execFile)
// The Redis examples connect to REDIS_URL: a server of the test's own.
const redis = await redisForTests()
const postgres = await postgresForTests()
after(async () => {
  await redis.close()
  await postgres.close()
})
const root = fileURLToPath(new URL('../..', import.meta.url))
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
const section = readme.slice(readme.indexOf('\n## API'), readme.indexOf('\n## Testing your code'))
const examples = [...section.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1])

test('the README has runnable examples', () => {
  assert.ok(examples.length >= 12, `found ${examples.length}`)
})

for (const [i, source] of examples.entries()) {
  const title = source.split('\n').find((l) => l && !l.startsWith('import')) ?? ''
  test(`README example ${i + 1}: ${title.slice(0, 60)}`, async () => {
    const { stdout, stderr } = await run(process.execPath, ['--input-type=module', '-e', source], {
      cwd: root,
      timeout: 20_000,
      env: { ...process.env, REDIS_URL: redis.url, DATABASE_URL: postgres.url },
    })
    assert.equal(stderr, '')
    // Lines the README annotates with `// value` print that value first.
    const expected = source
      .split('\n')
      .filter((l) => /^\s*console\.log\(/.test(l) && l.includes(');'))
      .map((l) => l.slice(l.lastIndexOf(');') + 2).match(/^\s*\/\/\s*(.*)$/)?.[1])
    const printed = stdout.trimEnd().split('\n')
    expected.forEach((comment, n) => {
      if (comment === undefined || comment.startsWith('~') || printed[n] === undefined) return
      const value = comment.split(':')[0].trim()
      assert.ok(
        printed[n].startsWith(value) || value.startsWith(printed[n]),
        `line ${n + 1} printed "${printed[n]}", the README says "${comment}"`,
      )
    })
  })
}
