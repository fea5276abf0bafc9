#!/usr/bin/env node
// The one entry point: serve | dev | status | tenants ... | config dump.
// Each part registers its own commands; this file only wires them and exits with
// a clear message (never a stack) on a ConfigError or a refused operation.
import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Command, CommanderError } from 'commander'
import { loadConfig, dumpConfig } from './config/index.js'
import { ConfigError, GatehouseError } from './shared/errors.js'
import { registerTenantStoreCommands } from './tenants/commands.js'
import { registerPlatformCommands } from './platform/commands.js'
import { registerPanelCommands } from './panel/commands.js'
import { registerServeCommands, registerDevCommands } from './serve.js'

export function buildCli (): Command {
  const program = new Command('gatehouse')
    .description('Gatehouse: the gateway of a hosted-Postgres platform (GoTrue-protocol auth and PostgREST-protocol REST per database)')
    .option('-c, --config <file>', 'YAML process config (also GATEHOUSE_CONFIG)')
    .showHelpAfterError()
  const config = () => loadConfig({ file: program.opts().config, env: process.env })

  const tenants = program.command('tenants').description('manage tenant databases and their records')
  registerTenantStoreCommands(tenants, config)
  registerPlatformCommands(tenants, config)
  registerPanelCommands(tenants, config)

  registerServeCommands(program, config)
  registerDevCommands(program)

  program.command('config').description('process configuration')
    .command('dump').description('print the effective configuration, secrets masked')
    .action(() => { process.stdout.write(dumpConfig(config())) })
  return program
}

export async function main (argv: string[]): Promise<void> {
  const program = buildCli()
  program.exitOverride()
  try {
    await program.parseAsync(argv)
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode
      return
    }
    if (err instanceof ConfigError || err instanceof GatehouseError) {
      process.stderr.write(`gatehouse: ${err.message}\n`)
      process.exitCode = 1
      return
    }
    process.stderr.write(`gatehouse: unexpected failure: ${(err as Error)?.message ?? String(err)}\n`)
    process.exitCode = 1
  }
}

// Run when executed directly (also through the `gatehouse` bin symlink), not when imported.
function isMain (): boolean {
  if (!process.argv[1]) return false
  try { return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url)) } catch { return false }
}
if (isMain()) await main(process.argv)
