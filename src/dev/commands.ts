// `gatehouse dev` (the whole stack, what `npm start` runs; --reset removes its state) and
// `gatehouse status` (what dev.json says, and whether the stack that wrote it still runs).
import path from 'node:path'
import type { Command } from 'commander'
import { ConfigError } from '../shared/index.js'
import { pingPostgres } from '../platform/index.js'
import type { DevStack } from './stack.js'
import { readDevInfo, renderDevInfo, describeRunningStack } from './info.js'
import { runningDevInfo } from './running.js'
import { parsePortOffset } from './ports.js'
import { devEnvironmentHelp } from './help.js'
import { resetDevState } from './reset.js'

/** Stops the stack on Ctrl-C, SIGTERM, SIGHUP, or a failure nobody caught (the cluster and the mail catcher this process started go too). */
function stopOnSignals(stack: DevStack): void {
  let stopping = false
  const stop = (): void => {
    if (stopping) return
    stopping = true
    process.stdout.write('\nstopping...\n')
    void stack.stop().then(() => process.exit(0))
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  process.on('SIGHUP', stop)
  process.on('uncaughtException', (err) => {
    process.stderr.write(`gatehouse dev: unexpected failure: ${err.message}\n`)
    if (stopping) return
    stopping = true
    void stack.stop().finally(() => process.exit(1))
  })
}

async function dev(program: Command, o: { portOffset?: string; reset?: boolean }): Promise<void> {
  const stateDir = path.join(process.cwd(), '.gatehouse')
  if (o.reset === true) {
    const removed = await resetDevState(stateDir, (pid) => describeRunningStack(stateDir, pid))
    process.stdout.write(
      `removed ${removed.join(', ')}\nThe next \`npm start\` makes a fresh cluster, new keys and a new panel session.\n`,
    )
    return
  }
  const configFile = program.opts().config as string | undefined
  const portOffset = o.portOffset === undefined ? undefined : parsePortOffset(o.portOffset, '--port-offset')
  // The stack loads every part: imported only for `dev` (`status` stays light).
  const { startDev } = await import('./stack.js')
  const stack = await startDev({
    root: process.cwd(),
    env: process.env,
    configFile,
    portOffset,
    onReady: (info) => process.stdout.write(renderDevInfo(info)),
  })
  stopOnSignals(stack)
}

async function status(o: { json?: boolean }): Promise<void> {
  const info = readDevInfo(path.join(process.cwd(), '.gatehouse'))
  if (!info) throw new ConfigError('no development stack has run here: start one with `npm start`')
  // dev.json stays after a stop: tell a stack that runs from one that did.
  const running = runningDevInfo(process.cwd()) !== null
  if (running && !info.problems?.length) {
    // A Postgres the stack did not notice going (DATABASE_URL's, say).
    try {
      await pingPostgres(info.postgres_admin_url)
    } catch (err) {
      info.problems = [`${(err as Error).message}: requests that need a database fail`]
    }
  }
  process.stdout.write(o.json ? JSON.stringify(info, null, 2) + '\n' : renderDevInfo(info, { running }))
  if (!running) {
    if (o.json) process.stderr.write('gatehouse: the development stack is not running (npm start starts it)\n')
    process.exitCode = 3
  } else if (info.problems?.length) {
    if (o.json)
      process.stderr.write(`gatehouse: the development stack runs with a problem: ${info.problems.join('; ')}\n`)
    process.exitCode = 4
  }
}

export function registerDevCommands(program: Command): void {
  program
    .command('dev')
    .description(
      'run the whole service on embedded defaults (npm start): Postgres, tenants, engines, gateway, panel, mail catcher',
    )
    .option(
      '--port-offset <n>',
      "add n to every port of the stack (a second checkout's stack beside the first); also GATEHOUSE_DEV_PORT_OFFSET",
    )
    .option(
      '--reset',
      "remove this checkout's development state (.gatehouse/: the cluster wherever it lives, keys, mails) and exit",
    )
    .addHelpText('after', devEnvironmentHelp())
    .action((o: { portOffset?: string; reset?: boolean }) => dev(program, o))
  program
    .command('status')
    .description("print the development stack's URLs and keys (.gatehouse/dev.json)")
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExit status: 0 running, 3 not running (dev.json of its last start printed), 4 running with a problem (its Postgres gone, say).',
    )
    .action((o: { json?: boolean }) => status(o))
}
