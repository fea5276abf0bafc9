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

/**
 * The listener ports of a dev stack from `base` (gateway, rest, auth, panel, mail SMTP, mail
 * web: base .. base+5) with the admin listeners on ports the kernel picks.
 */
export function devStackPorts (base: number): NodeJS.ProcessEnv {
  return {
    GATEHOUSE_GATEWAY_PORT: String(base),
    GATEHOUSE_REST_PORT: String(base + 1),
    GATEHOUSE_AUTH_PORT: String(base + 2),
    GATEHOUSE_PANEL_PORT: String(base + 3),
    GATEHOUSE_MAIL_SMTP_PORT: String(base + 4),
    GATEHOUSE_MAIL_WEB_PORT: String(base + 5),
    GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
    GATEHOUSE_REST_ADMIN_PORT: '0',
    GATEHOUSE_AUTH_ADMIN_PORT: '0',
    GATEHOUSE_PANEL_ADMIN_PORT: '0'
  }
}
