// The one way tests wait for something that happens on its own (a NOTIFY, a reconnect, a
// process starting): poll a condition, never sleep for a time to pass.

/**
 * Calls `check` until it neither throws nor returns `false`, and resolves with what it
 * returned (so a check may assert by throwing, or answer true/false). After `timeoutMs`
 * (default 5 s, a bound for a machine under load, not a wait) it rejects with the check's
 * last error, or says the condition stayed false.
 */
export async function eventually<T>(
  check: () => T | Promise<T>,
  timeoutMs = 5_000,
  intervalMs = 20,
): Promise<Exclude<T, false>> {
  const end = Date.now() + timeoutMs
  for (;;) {
    let failure: unknown = null
    try {
      const v = await check()
      if (v !== false) return v as Exclude<T, false>
    } catch (err) {
      failure = err
    }
    if (Date.now() > end) {
      throw (
        failure ?? new Error(`the condition was still false after ${timeoutMs} ms: ${check.toString().slice(0, 200)}`)
      )
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

/** eventually() with the condition named in its failure (`what`). */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  try {
    await eventually(check, timeoutMs)
  } catch (err) {
    throw new Error(`timed out waiting until ${what}`, { cause: err })
  }
}
