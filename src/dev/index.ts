// `gatehouse dev` (what `npm start` runs): the whole service on embedded defaults.
// Embedded Postgres (or DATABASE_URL), the demo tenants of config/tenants/ provisioned on
// first start, the mail catcher, the REST and auth engines, the gateway and the panel in
// one process; writes what a person or a script needs to .gatehouse/dev.json.
// The stack (stack.ts) and its commands (commands.ts) load every part: they are imported only
// when a stack starts, so the CLI's other commands (which read runningDevDefaults) stay light.
import type { Command } from 'commander'
import type { DevOptions, DevStack } from './stack.js'

export { startEmbeddedPostgres, type EmbeddedPostgres } from './postgres.js'
export { runningDevInfo, runningDevDefaults } from './running.js'
export { offsetPortOverrides, devPgPort, DEV_PG_PORT } from './ports.js'
export { runtimeTenantRecord } from './tenant-files.js'
export type { DevInfo, DevDatabaseInfo } from './info.js'
export type { DevStack } from './stack.js'

/** Starts the whole service on embedded defaults (what `npm start` runs); see stack.ts. */
export async function startDev(opts: DevOptions): Promise<DevStack> {
  const { startDev: start } = await import('./stack.js')
  return start(opts)
}

/** `gatehouse dev` and `gatehouse status`. */
export async function registerDevCommands(program: Command): Promise<void> {
  const { registerDevCommands: register } = await import('./commands.js')
  register(program)
}
