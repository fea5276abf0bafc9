// scripts/code-metrics.mjs, which `npm run lint` runs with --max-lines 60 --max-depth 4: a
// function one line too long, or control flow one level too deep, fails it; at the limits it
// passes; `else if` chains count as one level.
import t, { type Test } from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const script = fileURLToPath(new URL('../../scripts/code-metrics.mjs', import.meta.url))

function check(t: Test, source: string): { code: number; out: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-shape-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, 'a.ts'), source)
  try {
    const out = execFileSync(process.execPath, [script, '--max-lines', '60', '--max-depth', '4', dir], {
      encoding: 'utf8',
      stdio: 'pipe',
    })
    return { code: 0, out }
  } catch (err) {
    const e = err as { status: number; stdout: string; stderr: string }
    return { code: e.status, out: e.stdout + e.stderr }
  }
}

/** A function of exactly `lines` lines. */
const fn = (lines: number): string => `export function f (): number {\n${'  void 0\n'.repeat(lines - 3)}  return 1\n}\n`

t.test('function length', async (t) => {
  t.equal(check(t, fn(60)).code, 0, '60 lines pass')
  const long = check(t, fn(61))
  t.equal(long.code, 1, '61 lines fail')
  t.match(long.out, /61\tf\t/, 'and the function is named with its length')
})

t.test('nesting', async (t) => {
  const nest = (depth: number): string => {
    let body = 'x++'
    for (let i = 0; i < depth; i++) body = `if (x > ${i}) {\n${body}\n}`
    return `export function g (x: number): number {\n${body}\nreturn x\n}\n`
  }
  t.equal(check(t, nest(4)).code, 0, 'four levels pass')
  t.equal(check(t, nest(5)).code, 1, 'five fail')
  const chain = `export function h (x: number): number {\n${Array.from({ length: 8 }, (_, i) => `if (x === ${i}) { x++ }`).join(' else ')}\nreturn x\n}\n`
  t.equal(check(t, chain).code, 0, 'an else-if chain of eight is one level')
})
