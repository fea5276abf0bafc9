// The environment of a developer's shell for spawning the CLI: the test run's services and
// GATEHOUSE_* settings left out, so the command sees only what a user would have set.

export function shellEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (
      k.startsWith('GATEHOUSE_') ||
      k === 'DATABASE_URL' ||
      k === 'REDIS_URL' ||
      k === 'NODE_OPTIONS' ||
      k.startsWith('TAP')
    )
      continue
    env[k] = v
  }
  return { ...env, ...extra }
}

/**
 * Every port of a dev stack left to the kernel: its listeners (gateway, engines, panel and
 * their admin listeners), the mail catcher's SMTP and web ports and the embedded Postgres's.
 * The stack reports what it got in .gatehouse/dev.json and its banner.
 */
export const KERNEL_PORTS_ENV: NodeJS.ProcessEnv = {
  GATEHOUSE_GATEWAY_PORT: '0',
  GATEHOUSE_REST_PORT: '0',
  GATEHOUSE_AUTH_PORT: '0',
  GATEHOUSE_PANEL_PORT: '0',
  GATEHOUSE_MAIL_SMTP_PORT: '0',
  GATEHOUSE_MAIL_WEB_PORT: '0',
  GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
  GATEHOUSE_REST_ADMIN_PORT: '0',
  GATEHOUSE_AUTH_ADMIN_PORT: '0',
  GATEHOUSE_PANEL_ADMIN_PORT: '0',
  GATEHOUSE_DEV_PG_PORT: '0',
}
