// The environment of a developer's shell for spawning the CLI: the test run's services and
// GATEHOUSE_* settings left out, so the command sees only what a user would have set.

export function shellEnv (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith('GATEHOUSE_') || k === 'DATABASE_URL' || k === 'REDIS_URL' || k === 'NODE_OPTIONS' || k.startsWith('TAP')) continue
    env[k] = v
  }
  return { ...env, ...extra }
}
