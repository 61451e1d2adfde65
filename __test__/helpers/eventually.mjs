// For state that settles a moment later (a reconnect, a subscription).

/** The first result of `attempt` that does not throw, trying every 25 ms for up to `ms`. */
export async function eventually(attempt, ms = 5_000) {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      return await attempt()
    } catch (e) {
      if (Date.now() > deadline) throw e
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
  }
}
