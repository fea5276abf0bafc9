// The panel's routes come from one table (src/panel/routes.ts), listed in docs/routes.md
// (rendered from it, checked by test/auth/route-table.test.ts) and in docs/panel-api.md:
// a route registered outside the table, or missing from either document, fails here.
import t from 'tap'
import { readFileSync } from 'node:fs'
import type { RouteOptions } from 'fastify'
import { loadConfig } from '../../src/config/index.js'
import { buildPanel, panelRouteList } from '../../src/panel/index.js'

const PREFIX = '/organizations/:org/databases/:db/api'

t.test("the panel serves exactly the table's routes", async (t) => {
  const config = loadConfig({
    env: {},
    overrides: {
      log: { level: 'silent' },
      panel: { port: 0, session_secret: 'panel-secret-of-this-test-0123456789abcdefgh' },
    },
  })
  const app = buildPanel({ config, tenants: { get: async () => null } })
  t.teardown(() => app.close())
  const seen: string[] = []
  app.addHook('onRoute', (r: RouteOptions) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') seen.push(`${m} ${r.url}`)
  })
  await app.ready()
  const listed = panelRouteList().map((r) => `${r.method} ${PREFIX}${r.path}`)
  t.same([...seen].sort(), [...listed].sort())
})

t.test('docs/routes.md and docs/panel-api.md name every route of the table', async (t) => {
  const routes = readFileSync('docs/routes.md', 'utf8')
  const api = readFileSync('docs/panel-api.md', 'utf8')
  for (const r of panelRouteList()) {
    t.ok(routes.includes(`| ${r.method} | \`${r.path}\` |`), `routes.md: ${r.method} ${r.path}`)
    const shown = r.path.replace(/:(\w+)/g, '<$1>')
    t.ok(api.includes(shown), `panel-api.md: ${shown}`)
  }
})
