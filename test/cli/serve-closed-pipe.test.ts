// `gatehouse serve gateway | head -3`: the reader of stdout goes away, so every later log
// line meets a closed pipe. SIGTERM must still end the process within the grace period
// (shutdown never waits on a log write). The real CLI (and a part logger of it) in a child
// process; its stdout is a pipe whose reading end this test closes.
import t from 'tap'
import http from 'node:http'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const cli = ['--import', 'tsx', path.join(root, 'src/cli.ts')]
const logThenExit = fileURLToPath(new URL('./fixtures/log-then-exit.ts', import.meta.url))

t.test(
  'a part logger whose stdout is a closed pipe: lines written just before exit never hold the process',
  async (t) => {
    const child = spawn(process.execPath, ['--import', 'tsx', logThenExit], {
      cwd: root,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    t.teardown(() => {
      if (child.exitCode === null) child.kill('SIGKILL')
    })
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    child.stdout.destroy()
    // Once it has started (however long that takes on a busy machine), it logs and exits at once.
    await new Promise<void>((resolve) => {
      child.stderr.on('data', (c: Buffer) => {
        if (c.toString().includes('ready')) resolve()
      })
    })
    child.stdin.write('go\n')
    const deadline = new Promise<'still running'>((resolve) =>
      setTimeout(() => resolve('still running'), 5_000).unref(),
    )
    // pino's default sink (sonic-boom) retries the closed pipe forever in its exit flush.
    t.equal(await Promise.race([exited, deadline]), 0, 'the process exited')
  },
)

function get(url: string): Promise<number> {
  return new Promise((resolve) => {
    http
      .get(url, { agent: false, headers: { apikey: 'pk_whatever_key_123' } }, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      })
      .on('error', () => resolve(0))
  })
}

t.test('serve gateway with its stdout pipe closed: SIGTERM ends it within the grace period', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-pipe-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const child = spawn(process.execPath, [...cli, 'serve', 'gateway'], {
    cwd: root,
    env: {
      ...process.env,
      GATEHOUSE_GATEWAY_PORT: '0',
      GATEHOUSE_GATEWAY_ADMIN_PORT: '0',
      GATEHOUSE_GATEWAY_SHUTDOWN_GRACE_MS: '1000',
      GATEHOUSE_TENANTS_DIR: dir,
      GATEHOUSE_LOG_LEVEL: 'info',
      DATABASE_URL: '',
      REDIS_URL: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })

  // Read until the gateway says where it listens, then close the reading end (head -3 exits).
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
      const m = /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"listening"/.exec(out)
      if (m) resolve(m[1]!)
    })
    child.once('exit', () => reject(new Error(`the gateway exited early: ${stderr}`)))
  })
  child.stdout.destroy()
  // Requests log lines into the closed pipe.
  for (let i = 0; i < 50; i++) t.equal(await get(`${url}/nosuchdb/rest/v1/todos`), 404)

  child.kill('SIGTERM')
  const deadline = new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 10_000).unref())
  const first = await Promise.race([exited, deadline])
  if (first === 'still running') {
    child.kill('SIGTERM')
    t.fail(
      `still running 10 s after SIGTERM (grace 1 s); a second SIGTERM ${await Promise.race([exited.then(() => 'ended it'), new Promise((resolve) => setTimeout(() => resolve('did not end it either'), 3_000).unref())])}`,
    )
    return
  }
  t.equal(first, 0, 'exit 0 within the grace period')
})
