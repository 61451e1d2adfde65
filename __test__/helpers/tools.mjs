// Tests that need a program only a few files use (support/tools.mjs): run
// when it is installed; else skipped, the reason naming the program and the
// command that installs it; with KEEL_TEST_REQUIRE_ALL=1 (CI), a failure.
import { describe, test } from 'node:test'
import { requireAll, skipReason } from '../../support/tools.mjs'

/**
 * Registers `body` as the suite `name` when every one of `tools` is installed.
 *
 * @param {string[]} tools names from support/tools.mjs TOOLS
 * @param {string} name
 * @param {() => void} body
 */
export function describeWith(tools, name, body) {
  if (!lacking(tools, name)) describe(name, body)
}

/**
 * When one of `tools` is not installed, registers `name` as a skipped test
 * saying what to install (a failing test under KEEL_TEST_REQUIRE_ALL=1) and
 * returns true; else registers nothing and returns false.
 *
 * @param {string[]} tools
 * @param {string} name
 */
export function lacking(tools, name) {
  const reason = skipReason(tools)
  if (!reason) return false
  if (requireAll()) {
    test(name, () => {
      throw new Error(`${reason} (KEEL_TEST_REQUIRE_ALL=1: every program the tests use must be installed)`)
    })
  } else {
    // A skipped test, not a suite: the summary counts it among the skipped.
    test(name, { skip: reason }, () => {})
  }
  return true
}
