// docs/errors.md is the error reference: every code a part can send is listed there, and
// every listed code still exists (the document is regenerated from the sources by
// scripts/errors-doc.mjs; this test fails when someone adds or retires a code without it).
import t from 'tap'
import { readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { GATEWAY_ERROR_CODES, REFUSAL_CODES } from '../../src/gateway/index.js'
import { PANEL_ERROR_CODES } from '../../src/panel/index.js'

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8')

t.test('docs/errors.md matches the codes in the sources', async (t) => {
  const r = spawnSync(process.execPath, ['scripts/errors-doc.mjs', '--check'], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr || 'in sync')
})

t.test('every exported registry code is documented', async (t) => {
  for (const code of [...GATEWAY_ERROR_CODES, ...REFUSAL_CODES, ...PANEL_ERROR_CODES]) {
    t.match(doc, `| \`${code}\` |`, code)
  }
})
