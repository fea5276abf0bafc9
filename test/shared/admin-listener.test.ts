// The admin listener of every part as serve.ts starts it (real sockets, real Redis and
// Postgres): /healthz, /readyz checking the part's real dependencies, /metrics with process
// metrics, per-tenant request counts and latency and per-tenant pool use; none of it on the
// public ports. Readiness names the failing dependency when Redis or Postgres does not answer;
// `?exclude=<check>` leaves one out and `?verbose` lists the checks as text (kube-apiserver's
// conventions), and a part that drains is not ready whatever is excluded.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { loadConfig, type Config } from '../../src/config/index.js'
import { createStoreAndCache, startPart, type PartName, type RunningPart } from '../../src/serve.js'
import { installGracefulShutdown } from '../../src/gateway/index.js'
import { adminQuery, adminUrl } from '../helpers/db.js'
import { createTestRedis } from '../helpers/redis.js'
import { createTestTenant } from '../helpers/tenants.js'
import { closedPort } from '../helpers/ports.js'

const SESSION_SECRET = 'admin-listener-test-secret-0123456789abcdef'

function config(over: Record<string, unknown>): Config {
  // A fresh object per section (the loader fills defaults into what it is given).
  const listen = () => ({ port: 0, admin_port: 0 })
  return loadConfig({
    env: {},
    overrides: {
      log: { level: 'silent' },
      gateway: listen(),
      rest: listen(),
      auth: listen(),
      panel: { ...listen(), session_secret: SESSION_SECRET },
      ...over,
    },
  })
}

async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; json(): any; headers: Headers }> {
  const r = await fetch(url, { headers })
  const body = await r.text()
  return { status: r.status, body, json: () => JSON.parse(body), headers: r.headers }
}

/** The value of the first sample line starting with `series` (labels as written). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

t.test('each part: health, readiness and metrics on its admin port only', async (t) => {
  const redis = createTestRedis(t)
  const base = config({
    tenants: { source: 'redis' },
    redis: { url: redis.url, key_prefix: redis.prefix },
    postgres: { url: adminUrl() },
  })
  const { store, tenants } = createStoreAndCache(base)
  t.teardown(async () => {
    tenants.close()
    await store.close()
  })

  const parts = new Map<PartName, RunningPart>()
  const start = async (name: PartName, cfg: Config): Promise<RunningPart> => {
    const p = await startPart(name, { config: cfg, tenants, store })
    t.teardown(() => p.app.close())
    parts.set(name, p)
    return p
  }
  const rest = await start('rest', base)
  const auth = await start('auth', base)
  const database = `admin_${randomBytes(4).toString('hex')}`
  const tenant = await createTestTenant(t, {
    database,
    upstreams: { rest: `${rest.url}/${database}`, auth: `${auth.url}/${database}` },
  })
  await store.putAll([tenant.tenant])
  const cfg = config({
    tenants: { source: 'redis' },
    redis: { url: redis.url, key_prefix: redis.prefix },
    postgres: { url: adminUrl() },
    public_url: 'http://127.0.0.1:1',
  })
  const gateway = await start('gateway', cfg)
  await start('panel', cfg)

  for (const [name, p] of parts) {
    t.ok(p.adminUrl.startsWith('http://127.0.0.1:'), `${name} has an admin listener on loopback`)
    t.not(p.adminUrl, p.url, `${name}'s admin port is not its public port`)
    let r = await get(`${p.adminUrl}/healthz`)
    t.equal(r.status, 200, `${name} /healthz`)
    t.same(r.json(), { status: 'ok', part: name })
    r = await get(`${p.adminUrl}/readyz`)
    t.equal(r.status, 200, `${name} /readyz`)
    t.same(
      r
        .json()
        .checks.map((c: { name: string; ok: boolean }) => [c.name, c.ok])
        .sort(),
      [
        ['postgres', true],
        ['redis', true],
      ],
      `${name} checked Redis and Postgres`,
    )
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      r = await get(`${p.url}${path}`)
      t.equal(r.status, 404, `${name}'s public port answers 404 for ${path}`)
      t.notMatch(r.body, /gatehouse_|process_cpu/, 'and no metrics')
    }
  }
  const pub = await get(`${gateway.url}/metrics`)
  t.equal(pub.json().code, 'not_found', "the gateway's public 404 is in its JSON error shape")

  // Requests through the gateway to both engines.
  const key = tenant.file.keys.public
  const db = tenant.database
  for (let i = 0; i < 3; i++) {
    const r = await get(`${gateway.url}/${db}/rest/v1/`, { apikey: key })
    t.equal(r.status, 200, `REST root answers: ${r.body.slice(0, 200)}`)
  }
  t.equal((await get(`${gateway.url}/${db}/auth/v1/settings`, { apikey: key })).status, 200, 'auth settings answer')
  const signIn = await fetch(`${gateway.url}/${db}/auth/v1/token?grant_type=password`, {
    method: 'POST',
    headers: { apikey: key, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'nobody@example.com', password: 'password-123' }),
  })
  t.equal(signIn.status, 400, "a sign-in of no user: the auth engine's pool connects")
  await get(`${rest.url}/no_such_db_x/`)

  const gm = (await get(`${gateway.adminUrl}/metrics`)).body
  t.equal(
    sample(gm, `gatehouse_requests_total{part="gateway",tenant="${db}",status="200"}`),
    4,
    'gateway counts per tenant and status (3 REST, 1 auth)',
  )
  t.ok(sample(gm, 'process_cpu_user_seconds_total') !== undefined, 'gateway: process metrics')

  const rm = (await get(`${rest.adminUrl}/metrics`)).body
  t.equal(
    sample(rm, `gatehouse_requests_total{part="rest",tenant="${db}",status="200"}`),
    3,
    'REST engine counts per tenant',
  )
  t.equal(
    sample(rm, `gatehouse_request_duration_seconds_count{part="rest",tenant="${db}"}`),
    3,
    'REST engine latency histogram per tenant',
  )
  t.ok(sample(rm, `gatehouse_request_duration_seconds_bucket{le="+Inf",part="rest",tenant="${db}"}`) === 3)
  t.equal(
    sample(rm, 'gatehouse_requests_total{part="rest",tenant="_unknown",status="404"}'),
    4,
    'unknown databases (the three probes of the public port, no_such_db_x) are counted as _unknown',
  )
  t.notMatch(rm, /no_such_db_x/, 'no label per unknown name')
  const inUse = sample(rm, `gatehouse_pool_connections{part="rest",tenant="${db}",state="in_use"}`)
  const idle = sample(rm, `gatehouse_pool_connections{part="rest",tenant="${db}",state="idle"}`)
  t.ok(
    inUse !== undefined && idle !== undefined && inUse + idle >= 1,
    `REST pool use of the tenant (in_use ${inUse}, idle ${idle})`,
  )
  // rest.pool_budget 0 (the default): half of what the cluster takes from non-superusers.
  const cluster = await adminQuery<{ usable: number }>(
    `SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int AS usable`,
  )
  t.equal(
    sample(rm, 'gatehouse_pool_budget{part="rest"}'),
    Math.floor(cluster.rows[0]!.usable / 2),
    'the REST budget is sized from the cluster',
  )
  t.ok(
    sample(rm, 'process_resident_memory_bytes') !== undefined ||
      sample(rm, 'nodejs_heap_size_used_bytes') !== undefined,
    'REST: process metrics',
  )

  const am = (await get(`${auth.adminUrl}/metrics`)).body
  t.equal(
    sample(am, `gatehouse_requests_total{part="auth",tenant="${db}",status="200"}`),
    1,
    'auth engine counts per tenant',
  )
  t.equal(
    sample(am, 'gatehouse_pool_budget{part="auth"}'),
    Math.floor(cluster.rows[0]!.usable / 4),
    'the auth budget is sized from the cluster (a quarter)',
  )
  const pm = (await get(`${parts.get('panel')!.adminUrl}/metrics`)).body
  t.match(pm, /nodejs_eventloop_lag_seconds/, 'panel: process metrics')
})

t.test('readyz is 503 naming the dependency that does not answer', async (t) => {
  const deadRedis = `redis://127.0.0.1:${await closedPort()}`
  const deadPg = `postgres://nobody:nothing@127.0.0.1:${await closedPort()}/postgres`

  // Redis down (tenant store), Postgres up.
  const cfg = config({
    tenants: { source: 'redis' },
    redis: { url: deadRedis, key_prefix: 'admin-test:' },
    postgres: { url: adminUrl() },
  })
  const deps = createStoreAndCache(cfg)
  t.teardown(async () => {
    deps.tenants.close()
    await deps.store.close()
  })
  const restPart = await startPart('rest', { config: cfg, ...deps })
  t.teardown(() => restPart.app.close())
  let r = await get(`${restPart.adminUrl}/readyz`)
  t.equal(r.status, 503, 'not ready while Redis is down')
  t.same(r.json().failing, ['redis'])
  t.match(r.json().message, /rest is not ready: redis/)
  t.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After')
  t.equal((await get(`${restPart.adminUrl}/healthz`)).status, 200, 'still alive')

  // Postgres down, tenant files.
  const cfg2 = config({ postgres: { url: deadPg } })
  const deps2 = createStoreAndCache(cfg2)
  t.teardown(async () => {
    deps2.tenants.close()
    await deps2.store.close()
  })
  const authPart = await startPart('auth', { config: cfg2, ...deps2 })
  t.teardown(() => authPart.app.close())
  r = await get(`${authPart.adminUrl}/readyz`)
  t.equal(r.status, 503, 'not ready while Postgres is unreachable')
  t.same(r.json().failing, ['postgres'])
  t.match(r.json().message, new RegExp(`postgres at 127\\.0\\.0\\.1:${new URL(deadPg).port}`))
  t.notMatch(r.body, /nothing/, 'no password in the answer')

  await authPart.app.close()
  await t.rejects(fetch(`${authPart.adminUrl}/healthz`), 'the admin listener closes with its part')
})

t.test('readyz ?exclude leaves a shared dependency out, ?verbose lists each check (kube style)', async (t) => {
  const deadRedis = `redis://127.0.0.1:${await closedPort()}`
  const cfg = config({
    tenants: { source: 'redis' },
    redis: { url: deadRedis, key_prefix: 'admin-test-exclude:' },
    postgres: { url: adminUrl() },
  })
  const deps = createStoreAndCache(cfg)
  t.teardown(async () => {
    deps.tenants.close()
    await deps.store.close()
  })
  const rest = await startPart('rest', { config: cfg, ...deps })
  t.teardown(() => rest.app.close())
  const readyz = (query: string) => get(`${rest.adminUrl}/readyz${query}`)

  let r = await readyz('')
  t.equal(r.status, 503, 'without exclude: not ready while Redis is down')
  t.same(r.json().failing, ['redis'])

  r = await readyz('?exclude=redis')
  t.equal(r.status, 200, `?exclude=redis: ready (Postgres answers): ${r.body}`)
  t.match(r.json(), { status: 'ready', part: 'rest', excluded: ['redis'] })
  t.same(
    r.json().checks.map((c: { name: string; ok: boolean }) => [c.name, c.ok]),
    [['postgres', true]],
    'redis is not run; postgres is',
  )
  t.equal(r.json().warning, undefined, 'no warning when every name matched')

  r = await readyz('?exclude=redis&exclude=postgres')
  t.equal(r.status, 200, 'exclude repeats')
  t.same(r.json().checks, [])
  t.same(r.json().excluded.sort(), ['postgres', 'redis'])

  // A name no check has: ignored as kube-apiserver does, and said so.
  r = await readyz('?exclude=rediss')
  t.equal(r.status, 503, 'an unknown name excludes nothing')
  t.same(r.json().failing, ['redis'])
  t.same(r.json().excluded, [])
  t.equal(r.json().warning, 'some health checks cannot be excluded: no matches for "rediss"')
  t.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After')

  r = await readyz('?verbose')
  t.equal(r.status, 503, '?verbose keeps the status')
  t.match(r.headers.get('content-type'), /^text\/plain/)
  t.equal(r.headers.get('x-content-type-options'), 'nosniff')
  t.ok(Number(r.headers.get('retry-after')) > 0, 'Retry-After')
  const lines = r.body.trimEnd().split('\n')
  t.ok(lines.includes('[+]postgres ok'), r.body)
  t.ok(
    lines.some((l) => l.startsWith('[-]redis failed: ') && l.length > '[-]redis failed: '.length),
    'redis fails with its reason',
  )
  t.equal(lines.at(-1), 'readyz check failed')

  r = await readyz('?exclude=redis&verbose&exclude=nope')
  t.equal(r.status, 200)
  t.same(r.body.split('\n'), [
    '[+]postgres ok',
    '[+]redis excluded: ok',
    'warn: some health checks cannot be excluded: no matches for "nope"',
    'readyz check passed',
    '',
  ])
})

t.test('readyz: a part that drains is not ready whatever is excluded', async (t) => {
  const deadRedis = `redis://127.0.0.1:${await closedPort()}`
  const cfg = config({
    tenants: { source: 'redis' },
    redis: { url: deadRedis, key_prefix: 'admin-test-drain:' },
    postgres: { url: adminUrl() },
    public_url: 'http://127.0.0.1:1',
  })
  const deps = createStoreAndCache(cfg)
  t.teardown(async () => {
    deps.tenants.close()
    await deps.store.close()
  })
  const gateway = await startPart('gateway', { config: cfg, ...deps })
  t.teardown(() => gateway.app.close())
  const readyz = (query: string) => get(`${gateway.adminUrl}/readyz${query}`)
  t.equal((await readyz('')).status, 503, 'Redis down: 503')
  t.equal((await readyz('?exclude=redis')).status, 200, 'Redis down, excluded: 200')

  // The drain of SIGTERM (shutdown() here), held open by a drain delay the test never waits out.
  const drain = installGracefulShutdown(gateway.app, {
    graceMs: 60_000,
    drainDelayMs: 60_000,
    signals: [],
    exit: () => {},
  })
  t.teardown(() => drain.dispose())
  void drain.shutdown('test')
  for (const query of ['', '?exclude=redis', '?exclude=redis&exclude=postgres&exclude=gateway']) {
    const r = await readyz(query)
    t.equal(r.status, 503, `draining: 503 for /readyz${query}`)
    t.equal(r.json().code, 'not_ready')
    t.match(r.json().message, /gateway is shutting down/)
  }
  const v = await readyz('?exclude=redis&exclude=postgres&verbose')
  t.equal(v.status, 503)
  t.same(v.body.split('\n'), [
    '[-]shutdown failed: gateway is shutting down',
    '[+]redis excluded: ok',
    '[+]postgres excluded: ok',
    'readyz check failed',
    '',
  ])
})
