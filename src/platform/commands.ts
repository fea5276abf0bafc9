// `gatehouse tenants create|drop|migrate`: provisioning commands (issue 3).
import type { Command } from 'commander'
import type { Config } from '../config/index.js'

export function registerPlatformCommands (_tenants: Command, _config: () => Config): void {
  // filled in by the provisioning work
}
