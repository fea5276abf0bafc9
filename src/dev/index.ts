// `gatehouse dev` (what `npm start` runs): the whole service on embedded defaults.
// Embedded Postgres (or DATABASE_URL), the demo tenants of config/tenants/ provisioned on
// first start, the mail catcher, the REST and auth engines, the gateway and the panel in
// one process; writes what a person or a script needs to .gatehouse/dev.json.
// The stack (stack.ts) and its commands (commands.ts) load every part: they are imported only
// when a stack starts, so the CLI's other commands (which read runningDevDefaults) stay light.
import type { Command } from 'commander'
import type { DevOptions, DevStack } from './stack.js'

export {
  startDevPostgres, startEmbeddedPostgres, type DevPostgres, type EmbeddedPostgres, type EmbeddedPostgresOptions
} from './postgres.js'
export { startDevMail, type DevMail } from './mail.js'
export { runningDevInfo, runningDevDefaults } from './running.js'
export { parsePortOffset, offsetPortOverrides, devPgPort, DEV_PG_PORT } from './ports.js'
export { devEnvironmentHelp } from './help.js'
export { resetDevState } from './reset.js'
export { sweepOrphanClusters, removeDevCluster } from './postgres.js'
export { acquireDevLock, devLockOwner, DevStackRunningError, LOCK_FILE, type DevLock, type DevLockOwner } from './lock.js'
export { runtimeTenantRecord, writeRuntimeTenantFile, writeRuntimeTenantFiles, tenantSourceFiles, TENANT_FILE, type DevEngines } from './tenant-files.js'
export { watchTenantFiles, type TenantWatcher, type TenantWatcherOptions } from './watch.js'
export { devSecrets, writeDevInfo, readDevInfo, renderDevInfo, type DevInfo, type DevDatabaseInfo } from './info.js'
export type { DevOptions, DevStack } from './stack.js'

/** Starts the whole service on embedded defaults (what `npm start` runs); see stack.ts. */
export async function startDev (opts: DevOptions): Promise<DevStack> {
  const { startDev: start } = await import('./stack.js')
  return start(opts)
}

/** `gatehouse dev` and `gatehouse status`. */
export async function registerDevCommands (program: Command): Promise<void> {
  const { registerDevCommands: register } = await import('./commands.js')
  register(program)
}
