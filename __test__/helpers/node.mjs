// The Node a test's child processes run: this one, or the command in
// KEEL_TEST_NODE when the suite itself runs in an emulator (the arm64 suite
// under qemu-user, scripts/test-arch.mjs: a process there cannot start a
// binary of its own architecture without the emulator in front).

const prefix = process.env.KEEL_TEST_NODE ? JSON.parse(process.env.KEEL_TEST_NODE) : [process.execPath]

/**
 * The program and arguments that run Node with `args`.
 *
 * @param {string[]} args
 * @returns {[string, string[]]}
 */
export function node(args) {
  return [prefix[0], [...prefix.slice(1), ...args]]
}
