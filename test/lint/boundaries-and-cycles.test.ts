// The project's ESLint configuration, run through ESLint's Node API on a small sample project:
// importing another part's internal module and an import cycle (type-only imports included)
// are both reported, while imports through a part's index.ts, and a part's own tests reaching
// into that part, are not.
import t, { type Test } from 'tap'
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ESLint, type Linter } from 'eslint'

const configModule = fileURLToPath(new URL('../../eslint.config.js', import.meta.url))

interface Found {
  file: string
  line: number
  rule: string | null
  message: string
}

async function lintSample(t: Test, files: Record<string, string>): Promise<Found[]> {
  const root = t.testdir()
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true })
    writeFileSync(path.join(root, name), text)
  }
  const { lintConfig } = (await import(configModule)) as { lintConfig: () => Linter.Config[] }
  const eslint = new ESLint({ cwd: root, overrideConfigFile: true, overrideConfig: lintConfig() })
  const results = await eslint.lintFiles(['.'])
  return results.flatMap((r) =>
    r.messages.map((m) => ({
      file: path.relative(root, r.filePath),
      line: m.line,
      rule: m.ruleId,
      message: m.message,
    })),
  )
}

t.test("an import of another part's internal module is reported; through its index.ts it is not", async (t) => {
  const found = await lintSample(t, {
    'src/alpha/index.ts': "export { a } from './inner.js'\n",
    'src/alpha/inner.ts': 'export const a = 1\n',
    'src/beta/index.ts': "import { a } from '../alpha/inner.js'\nexport const b = a\n",
    'src/beta/fine.ts': "import { a } from '../alpha/index.js'\nexport const c = a\n",
    'src/entry.ts': "import { a } from './alpha/inner.js'\nexport const d = a\n",
    'test/alpha/inner.test.ts': "import { a } from '../../src/alpha/inner.js'\nexport const e = a\n",
    'test/beta/reach.test.ts': "import { a } from '../../src/alpha/inner.js'\nexport const f = a\n",
    'test/helpers/reach.ts': "import { a } from '../../src/alpha/inner.js'\nexport const g = a\n",
    'src/gamma/index.ts': "export type Inner = typeof import('../alpha/inner.js')\n",
  })
  const boundary = found.filter((f) => f.rule === 'gatehouse/part-boundaries')
  t.same(
    boundary.map((f) => `${f.file}:${f.line}`).sort(),
    [
      'src/beta/index.ts:1',
      'src/entry.ts:1',
      'src/gamma/index.ts:1',
      'test/beta/reach.test.ts:1',
      'test/helpers/reach.ts:1',
    ],
    "other parts (also in a type position), the entry files, other parts' tests and helpers may not reach into alpha",
  )
  t.equal(
    boundary[0]!.message,
    "'../alpha/inner.js' reaches inside the alpha part: import it through src/alpha/index.ts, its one public entry",
  )
  t.same(
    found.filter((f) => f.rule !== 'gatehouse/part-boundaries'),
    [],
    'nothing else is reported',
  )
})

t.test('an import cycle is reported, also when it runs through type-only imports', async (t) => {
  const found = await lintSample(t, {
    'src/gamma/index.ts': "export { one } from './one.js'\n",
    'src/gamma/one.ts': "import { two } from './two.js'\nexport const one = (): number => two() + 1\n",
    'src/gamma/two.ts': "import { three } from './three.js'\nexport const two = (): number => three()\n",
    'src/gamma/three.ts': "import { one } from './one.js'\nexport const three = (): number => one.length\n",
    'src/delta/index.ts': "export type { Left } from './left.js'\n",
    'src/delta/left.ts': "import type { Right } from './right.js'\nexport interface Left { right?: Right }\n",
    'src/delta/right.ts': "import type { Left } from './left.js'\nexport interface Right { left?: Left }\n",
  })
  const cycles = found.filter((f) => f.rule === 'gatehouse/no-import-cycle')
  t.same(cycles.map((f) => f.file).sort(), [
    'src/delta/left.ts',
    'src/delta/right.ts',
    'src/gamma/one.ts',
    'src/gamma/three.ts',
    'src/gamma/two.ts',
  ])
  t.equal(
    cycles.find((f) => f.file === 'src/gamma/one.ts')!.message,
    'import cycle: src/gamma/one.ts -> src/gamma/two.ts -> src/gamma/three.ts -> src/gamma/one.ts',
  )
  t.same(
    found.filter((f) => f.rule !== 'gatehouse/no-import-cycle'),
    [],
    'nothing else is reported',
  )
})
