// `gatehouse tenants apply|list|show|delete`: the tenant store commands (issue 2).
import type { Command } from 'commander'
import type { Config } from '../config/index.js'

export function registerTenantStoreCommands (_tenants: Command, _config: () => Config): void {
  // filled in by the tenant store work
}
