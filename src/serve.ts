// `gatehouse serve gateway|rest|auth|panel` and `gatehouse dev` / `status`.
import type { Command } from 'commander'
import type { Config } from './config/index.js'

export function registerServeCommands (_program: Command, _config: () => Config): void {
  // filled in as the parts land
}
