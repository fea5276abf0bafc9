// The process configuration's validation errors name the field, where its value came from and
// what it may be (docs/configuration.md): one line per problem, never a schema's internals.
import t from 'tap'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { loadConfig } from '../../src/config/index.js'
import { problemsOf } from '../helpers/config-errors.js'

t.test('a value outside a set of choices names the choices, once', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'gatehouse-config-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'bad.yaml')
  writeFileSync(file, 'tenants:\n  source: mysql\n')
  t.same(
    problemsOf(() => loadConfig({ file, env: {} })),
    [`tenants.source: must be one of "files", "redis" [from ${file}]`],
  )
  t.same(
    problemsOf(() => loadConfig({ env: { GATEHOUSE_LOG_LEVEL: 'loud' } })),
    [
      'log.level: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent" [from GATEHOUSE_LOG_LEVEL]',
    ],
  )
})

t.test('other problems keep their own message and source', async (t) => {
  t.same(
    problemsOf(() => loadConfig({ env: { GATEHOUSE_GATEWAY_PORT: 'abc' } })),
    ['gateway.port: must be integer [from GATEHOUSE_GATEWAY_PORT]'],
  )
})
