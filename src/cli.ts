#!/usr/bin/env node
// The one entry point: serve | dev | status | tenants ... | config dump.
// Each part registers its own commands; this file only wires them and exits with
// a clear message (never a stack) on a ConfigError or a refused operation.
// Only the command group being run is loaded (its module pulls in fastify, pg, ioredis ...):
// `gatehouse --help` and `--version` load commander and nothing else of weight.
import { readFileSync, realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import path from 'node:path'
import { Command, CommanderError } from 'commander'
import type { Config, LoadConfigOptions } from './config/index.js'

type ConfigFn = () => Config
interface Loaders {
  /** The configuration for commands that create or change tenants. */
  config: ConfigFn
  /** The configuration for commands that read tenants (the running dev stack's own files). */
  readConfig: ConfigFn
  /** Whether a development stack (npm start) runs in this checkout. */
  devRunning: () => boolean
}

interface Group {
  name: string
  description: string
  register(program: Command, loaders: Loaders): Promise<void>
}

/** `gatehouse dev` and `gatehouse status`: one module registers both. */
async function registerDev(program: Command): Promise<void> {
  const { registerDevCommands } = await import('./dev/index.js')
  await registerDevCommands(program)
}

const GROUPS: Group[] = [
  {
    name: 'serve',
    description: 'run one part for production: gateway | rest | auth | panel',
    register: async (program, { config }) => {
      ;(await import('./serve.js')).registerServeCommands(program, config)
    },
  },
  {
    name: 'dev',
    description:
      'run the whole service on embedded defaults (npm start): Postgres, tenants, engines, gateway, panel, mail catcher',
    register: registerDev,
  },
  {
    name: 'status',
    description: "print the development stack's URLs and keys (.gatehouse/dev.json)",
    register: registerDev,
  },
  {
    name: 'tenants',
    description: 'manage tenant databases and their records',
    async register(program, { config, readConfig }) {
      const [store, platform, panel] = await Promise.all([
        import('./tenants/index.js'),
        import('./platform/index.js'),
        import('./panel/index.js'),
      ])
      const tenants = program.command('tenants').description('manage tenant databases and their records')
      store.registerTenantStoreCommands(tenants, readConfig)
      store.registerSigningKeyCommands(tenants, config)
      platform.registerPlatformCommands(tenants, config)
      panel.registerPanelCommands(tenants, readConfig)
    },
  },
  {
    name: 'gen',
    description: 'generate code from a database: gen types typescript <database>',
    register: async (program, { readConfig }) => {
      ;(await import('./typegen/index.js')).registerGenCommands(program, readConfig)
    },
  },
  {
    name: 'db',
    description: "a Supabase project's migrations: db push <database> | db reset <database>",
    async register(program, { config, devRunning }) {
      ;(await import('./platform/index.js')).registerDbCommands(program, config, devRunning)
    },
  },
  {
    name: 'config',
    description: 'process configuration',
    async register(program, { config }) {
      const { dumpConfig } = await import('./config/index.js')
      program
        .command('config')
        .description('process configuration')
        .command('dump')
        .description('print the effective configuration, secrets masked')
        .action(() => {
          process.stdout.write(dumpConfig(config()))
        })
    },
  },
]

/** This package's version (package.json beside src/ and dist/). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string }
  return pkg.version ?? '0.0.0'
}

/** The first command word of argv (after the global -c/--config option), if any. */
function commandWord(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === '-c' || a === '--config') {
      i++
      continue
    }
    if (a.startsWith('-')) continue
    return a
  }
  return undefined
}

/** `cwd`, or the nearest directory above it where `running(dir)` holds; `cwd` when none does. */
function stackRoot(cwd: string, running: (dir: string) => boolean): string {
  for (let dir = path.resolve(cwd); ; dir = path.dirname(dir)) {
    if (running(dir)) return dir
    if (path.dirname(dir) === dir) return cwd
  }
}

/**
 * `tenants apply` in a checkout where `npm start` runs, with no config naming a store: the
 * stack applies config/tenants itself (pointed at its own cluster and engines, into Redis when
 * it runs with one), so an apply here would at best do nothing and at worst write the files'
 * default ports over the stack's records. It is refused with what to do instead; `--dry-run`
 * (validation only) and an explicit store (-c, GATEHOUSE_CONFIG, GATEHOUSE_TENANTS_SOURCE) pass.
 */
function guardApplyBesideDevStack(
  program: Command,
  running: (root: string) => { pid?: number; tenants_source?: string } | null,
): void {
  const apply = program.commands.find((c) => c.name() === 'tenants')?.commands.find((c) => c.name() === 'apply')
  if (apply === undefined) return
  apply.hook('preAction', async (_cmd, action) => {
    if ((action.opts() as { dryRun?: boolean }).dryRun === true) return
    if (program.opts().config !== undefined || process.env.GATEHOUSE_CONFIG || process.env.GATEHOUSE_TENANTS_SOURCE)
      return
    const dev = running(process.cwd())
    if (dev === null) return
    const { ConfigError } = await import('./shared/index.js')
    throw new ConfigError(
      `the development stack running here (npm start, pid ${String(dev.pid)}) applies config/tenants itself: ` +
        `a created or edited tenant file is served within a second${dev.tenants_source === 'redis' ? ' (it writes the record to its Redis)' : ''}, ` +
        'and a bad file is reported in its log. Nothing to apply; `gatehouse tenants apply --dry-run <dir>` validates files. ' +
        'To apply to another tenant store, name it: -c <config file> or GATEHOUSE_TENANTS_SOURCE=redis GATEHOUSE_REDIS_URL=<url>.',
    )
  })
}

/**
 * The program for `argv`: the command group named in it registered in full, every other
 * group as a name and description for the help listing.
 */
export async function buildCli(argv: readonly string[] = process.argv): Promise<Command> {
  const program = new Command('gatehouse')
    .description(
      'Gatehouse: the gateway of a hosted-Postgres platform (GoTrue-protocol auth and PostgREST-protocol REST per database)',
    )
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('-c, --config <file>', 'YAML process config (also GATEHOUSE_CONFIG)')
    .showHelpAfterError()
  const word = commandWord(argv.slice(2))
  const chosen = GROUPS.find((g) => g.name === word)
  if (chosen === undefined) {
    for (const g of GROUPS) program.command(g.name).description(g.description)
    return program
  }
  const [{ loadConfig, unknownEnvironment }, { runningDevDefaults, runningDevInfo }] = await Promise.all([
    import('./config/index.js'),
    import('./dev/index.js'),
  ])
  // A typo in a variable name is never silently ignored.
  for (const w of unknownEnvironment(process.env)) process.stderr.write(`gatehouse: ${w}\n`)
  // The checkout a development stack runs in: this directory or the nearest above it that has
  // one (an app's folder inside the checkout, as git finds its repository).
  const root = stackRoot(process.cwd(), (dir) => runningDevInfo(dir) !== null)
  const load = (kind: 'write' | 'read'): Config => {
    const opts: LoadConfigOptions = { file: program.opts().config, env: process.env }
    // A development stack running in this directory supplies the defaults (its cluster, its
    // tenant files); the config file and GATEHOUSE_* variables still win.
    const dev = runningDevDefaults(root, kind)
    if (dev !== null) opts.defaults = dev
    return loadConfig(opts)
  }
  await chosen.register(program, {
    config: () => load('write'),
    readConfig: () => load('read'),
    devRunning: () => runningDevInfo(root) !== null,
  })
  if (chosen.name === 'tenants') guardApplyBesideDevStack(program, runningDevInfo)
  // `gatehouse dev` also registers `status` (and the other way round): keep one of each.
  for (const g of GROUPS) {
    if (!program.commands.some((c) => c.name() === g.name)) program.command(g.name).description(g.description)
  }
  return program
}

export async function main(argv: string[]): Promise<void> {
  try {
    const program = await buildCli(argv)
    program.exitOverride()
    await program.parseAsync(argv)
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode
      return
    }
    // Loaded here, not at the top: the shared part pulls in fastify, pg and jose, which
    // `--help` and `--version` never need. A GatehouseError was thrown by a module that
    // already loaded it, so this import costs nothing then.
    const { ConfigError, GatehouseError } = await import('./shared/index.js')
    if (err instanceof ConfigError || err instanceof GatehouseError) {
      process.stderr.write(`gatehouse: ${err.message}\n`)
      process.exitCode = 1
      return
    }
    process.stderr.write(`gatehouse: unexpected failure: ${(err as Error)?.message ?? String(err)}\n`)
    process.exitCode = 1
  }
}

// Run when executed directly (node src/cli.ts, node dist/cli.js), not when imported (the
// bin shim imports it and calls main()).
function isMain(): boolean {
  if (!process.argv[1]) return false
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url))
  } catch {
    return false
  }
}
if (isMain()) await main(process.argv)
