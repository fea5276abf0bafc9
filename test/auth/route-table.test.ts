// The auth engine's routes come from one table (src/auth/routes/table.ts) and docs/routes.md
// is rendered from it: a route registered outside the table, or a table changed without
// `npm run routes-doc`, fails here.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import type { RouteOptions } from 'fastify'
import { renderRoutesDoc, ROUTES_DOC } from '../../scripts/routes-doc.js'
import { authRouteList, buildAuthEngine } from '../../src/auth/index.js'
import { loadConfig } from '../../src/config/index.js'

t.test('docs/routes.md is what the route tables render', async (t) => {
  t.equal(readFileSync(ROUTES_DOC, 'utf8'), renderRoutesDoc(), 'in sync (else run npm run routes-doc)')
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/routes-doc.ts', '--check'], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr || 'the script checks the file the same way')
})

t.test('the doc lists the routes a user of auth-js reaches, the ones an older list missed among them', async (t) => {
  const doc = readFileSync(ROUTES_DOC, 'utf8')
  for (const line of [
    '| POST | `/factors` |',
    '| GET | `/reauthenticate` | user |',
    '| GET | `/user/identities` |',
    '| PUT | `/user` | user, database audience | otp (user) |',
  ]) {
    t.ok(doc.includes(line), line)
  }
})

t.test("the engine serves exactly the table's routes below /:database (plus the process health)", async (t) => {
  const config = loadConfig({ env: {}, overrides: { log: { level: 'silent' }, auth: { port: 0 } } })
  const app = buildAuthEngine({ config, tenants: { get: async () => null } })
  t.teardown(() => app.close())
  const seen: string[] = []
  app.addHook('onRoute', (r: RouteOptions) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') seen.push(`${m} ${r.url}`)
  })
  await app.ready()
  const listed = authRouteList().map((r) => `${r.method} /:database${r.path}`)
  t.same([...seen].sort(), [...listed].sort(), 'every registered route is in the table, and every row is registered')
  t.equal(new Set(listed).size, listed.length, 'no route twice')
  t.ok(app.hasRoute({ method: 'GET', url: '/health' }), 'the process health')
})
