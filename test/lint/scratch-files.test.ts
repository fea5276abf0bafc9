// `npm test` lints the project's own sources, never a person's scratch files in the checkout
// (README's try.mjs saved in the root, a scratch folder): those may fail any rule.
import t from 'tap'
import { mkdirSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ESLint, type Linter } from 'eslint'

const configModule = fileURLToPath(new URL('../../eslint.config.js', import.meta.url))
const BAD = 'const unused = 1\n'

t.test("scratch files in the checkout are not linted; the project's sources are", async (t) => {
  const root = t.testdir()
  const files: Record<string, string> = {
    'try.mjs': BAD,
    'scratch/play.ts': BAD,
    'src/a/index.ts': BAD,
    'test/a.test.ts': BAD,
    'scripts/x.mjs': BAD,
    'deploy/bin/y.mjs': BAD,
  }
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true })
    writeFileSync(path.join(root, name), text)
  }
  const { lintConfig } = (await import(configModule)) as { lintConfig: () => Linter.Config[] }
  const eslint = new ESLint({ cwd: root, overrideConfigFile: true, overrideConfig: lintConfig() })
  const results = await eslint.lintFiles(['.'])
  const linted = results
    .filter((r) => r.messages.length > 0)
    .map((r) => path.relative(root, r.filePath))
    .sort()
  t.same(linted, ['deploy/bin/y.mjs', 'scripts/x.mjs', 'src/a/index.ts', 'test/a.test.ts'])
})
