// State files another process reads while the stack rewrites them (.gatehouse/dev.json, read by
// `gatehouse tenants create|drop` beside a running `npm start`; the stack's generated tenant
// files, read by its tenant store; its lock, read by a second start) are replaced whole: a reader never sees a truncated or
// half-written file. The writer runs in a worker thread so its writes and the reads here really
// overlap; the reader stops when the writer is done (a shared flag), at most MAX_READS reads.
import t from 'tap'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { readDevInfo, writeDevInfo } from '../../src/dev/info.js'
import { parse as parseYaml } from 'yaml'

const WRITES = 400
const MAX_READS = 2_000_000

/**
 * Runs `call` of `module` (a TypeScript file of src/dev) WRITES times in a worker, once it says
 * it is ready and the reader has set the flag to 1; sets the flag to 2 when done (3 when it failed).
 */
async function writer(module: string, call: string, dir: string, done: Int32Array): Promise<Worker> {
  const code = `
    const { workerData, parentPort } = require('node:worker_threads')
    ;(async () => {
      const { tsImport } = await import('tsx/esm/api')
      const m = await tsImport(workerData.module, workerData.from)
      const done = new Int32Array(workerData.flag)
      parentPort.postMessage('ready')
      // Writes begin once the reader reads (flag 1): a writer done before the reader ran proves nothing.
      Atomics.wait(done, 0, 0, 30000)
      for (let i = 0; i < workerData.writes; i++) {
        // Alternately long and short, so a half-written or truncated file cannot parse.
        const big = i % 2 === 0 ? 2000 : 1
        ${call}
      }
      Atomics.store(done, 0, 2)
    })().catch((err) => { console.error(err); Atomics.store(new Int32Array(workerData.flag), 0, 3) })`
  const w = new Worker(code, {
    eval: true,
    workerData: { module, from: import.meta.url, writes: WRITES, dir, flag: done.buffer },
  })
  await new Promise((resolve, reject) => {
    w.once('message', resolve)
    w.once('error', reject)
  })
  return w
}

/** Reads with `read` while the writer runs; returns how many reads saw a whole file and what failed. */
function readWhileWriting(done: Int32Array, read: () => boolean): { whole: number; broken: string[] } {
  let whole = 0
  const broken: string[] = []
  Atomics.store(done, 0, 1)
  Atomics.notify(done, 0)
  for (let i = 0; i < MAX_READS && Atomics.load(done, 0) < 2; i++) {
    try {
      if (read()) whole++
    } catch (err) {
      broken.push((err as Error).message)
    }
  }
  return { whole, broken }
}

t.test('dev.json: a reader never reads a partial file while the stack rewrites it', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-state-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeDevInfo(dir, { gateway_url: 'http://x/first' } as never)
  const done = new Int32Array(new SharedArrayBuffer(4))
  const w = await writer(
    path.resolve('src/dev/info.ts'),
    `m.writeDevInfo(workerData.dir, { gateway_url: 'http://x/' + i, problems: Array.from({ length: big }, (_, k) => 'problem ' + k) })`,
    dir,
    done,
  )
  const ended = new Promise((resolve) => w.once('exit', resolve))
  const r = readWhileWriting(done, () => readDevInfo(dir)?.gateway_url !== undefined)
  await ended
  t.equal(Atomics.load(done, 0), 2, 'the writer finished')
  t.same(r.broken.slice(0, 3), [], 'no read failed')
  t.ok(r.whole > 0, `${r.whole} whole reads`)
  t.equal(readDevInfo(dir)?.gateway_url, `http://x/${WRITES - 1}`)
})

t.test("the stack's generated tenant files: the same", async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-state-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'app.yaml')
  const done = new Int32Array(new SharedArrayBuffer(4))
  const w = await writer(
    path.resolve('src/dev/tenant-files.ts'),
    `m.writeRuntimeTenantFile(workerData.dir, { database: 'app', n: i, pad: Array.from({ length: big }, (_, k) => 'line ' + k) })`,
    dir,
    done,
  )
  const ended = new Promise((resolve) => w.once('exit', resolve))
  const r = readWhileWriting(done, () => {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') return false // before the first write
      throw err
    }
    const doc = parseYaml(text) as { n?: number; pad?: string[] }
    if (typeof doc?.n !== 'number' || !Array.isArray(doc.pad) || doc.pad.length !== (doc.n % 2 === 0 ? 2000 : 1))
      throw new Error(`partial file (${text.length} characters)`)
    return true
  })
  await ended
  t.equal(Atomics.load(done, 0), 2, 'the writer finished')
  t.same(r.broken.slice(0, 3), [], 'no read failed')
  t.ok(r.whole > 0, `${r.whole} whole reads`)
})

t.test('dev.lock: taken and released again and again, never read half-written', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-state-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const done = new Int32Array(new SharedArrayBuffer(4))
  const w = await writer(path.resolve('src/dev/lock.ts'), `m.acquireDevLock(workerData.dir).release()`, dir, done)
  const ended = new Promise((resolve) => w.once('exit', resolve))
  const r = readWhileWriting(done, () => {
    let text: string
    try {
      text = readFileSync(path.join(dir, 'dev.lock'), 'utf8')
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') return false // released
      throw err
    }
    return typeof (JSON.parse(text) as { pid?: number }).pid === 'number'
  })
  await ended
  t.equal(Atomics.load(done, 0), 2, 'the writer finished')
  t.same(r.broken.slice(0, 3), [], 'no read failed')
  t.ok(r.whole > 0, `${r.whole} whole reads`)
})
