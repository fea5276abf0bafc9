// Gateway test helpers: tenants (plaintext keys + runtime form), real echo upstreams on
// port 0 that report what they received, a started gateway, a raw HTTP client (node:http:
// fetch forbids headers such as Connection), and token signing. Not a test file.
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { SignJWT, type JWTPayload } from 'jose'
import { loadConfig, type Config } from '../../src/config/index.js'
import {
  parseTenantFile,
  toTenant,
  tenantIssuer,
  type Tenant,
  type TenantFile,
  type TenantLookup,
} from '../../src/tenants/index.js'
import { buildGateway, type GatewayDeps } from '../../src/gateway/index.js'
import { buildPartAdmin } from '../../src/shared/index.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

export const PUBLIC_URL = 'https://api.gatehouse.test'

export interface TestTenant {
  file: TenantFile
  tenant: Tenant
}

/** A tenant whose upstreams point at `upstreams` (base URLs; the database is appended). */
export function makeTenant(
  database: string,
  upstreams: { auth: string; rest: string },
  over: Record<string, unknown> = {},
): TestTenant {
  const hex = randomBytes(5).toString('hex')
  const raw = {
    database,
    organization: `org_${database}`,
    postgres: `postgres://owner:pw@127.0.0.1:5432/${database}`,
    roles: { anon: `t_${hex}_anon`, auth: `t_${hex}_auth`, svc: `t_${hex}_svc` },
    jwt: { secret: randomBytes(24).toString('base64url'), upstream_secret: randomBytes(24).toString('base64url') },
    keys: {
      public: `pk_test_${randomBytes(12).toString('hex')}`,
      secret: `sk_test_${randomBytes(12).toString('hex')}`,
    },
    upstreams: { auth: `${upstreams.auth}/${database}`, rest: `${upstreams.rest}/${database}` },
    auth: {},
    ...over,
  }
  const file = parseTenantFile(raw, `${database}.yaml`, {})
  return { file, tenant: toTenant(file) }
}

/** A TenantLookup over fixed tenants that counts look-ups. */
export function lookupOf(...tenants: TestTenant[]): TenantLookup & { calls: string[] } {
  const map = new Map(tenants.map((t) => [t.tenant.database, t.tenant]))
  const calls: string[] = []
  return {
    calls,
    get: async (db: string) => {
      calls.push(db)
      return map.get(db) ?? null
    },
  }
}

export function testConfig(overrides: Record<string, unknown> = {}): Config {
  const gateway = (overrides.gateway ?? {}) as Record<string, unknown>
  return loadConfig({
    env: {},
    overrides: { public_url: PUBLIC_URL, log: { level: 'silent' }, ...overrides, gateway: { port: 0, ...gateway } },
  })
}

interface Received {
  method: string
  url: string
  headers: http.IncomingHttpHeaders
  rawHeaders: string[]
  body: Buffer
}

export interface Upstream {
  url: string
  received: Received[]
  last(): Received
  server: http.Server
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void

/**
 * A real HTTP server on 127.0.0.1:0 that records every request and, by default, answers
 * 200 JSON {method, url, headers, bodyLength}. `handler` replaces the answer.
 */
export async function startUpstream(t: Teardown, handler?: Handler): Promise<Upstream> {
  const received: Received[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
      })
      if (handler) return handler(req, res, body)
      const out = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, bodyLength: body.length })
      res.writeHead(200, { 'content-type': 'application/json', 'content-range': '0-0/*' })
      res.end(out)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    server,
    last() {
      const r = received[received.length - 1]
      if (!r) throw new Error('the upstream received nothing')
      return r
    },
  }
}

export interface StartedGateway {
  app: FastifyInstance
  url: string
  port: number
  /** The admin listener: /healthz, /readyz, /metrics. */ adminUrl: string
}

export async function startGateway(
  t: Teardown,
  deps: Partial<GatewayDeps> & { tenants: TenantLookup; config?: Config },
): Promise<StartedGateway> {
  const app = buildGateway({ config: deps.config ?? testConfig(), ...deps })
  // The admin listener (/healthz, /readyz, /metrics) as serve.ts runs it beside the gateway.
  const admin = buildPartAdmin(app)
  app.addHook('onClose', async () => {
    await admin.close()
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  await admin.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const { port } = app.server.address() as AddressInfo
  const adminPort = (admin.server.address() as AddressInfo).port
  return { app, url: `http://127.0.0.1:${port}`, port, adminUrl: `http://127.0.0.1:${adminPort}` }
}

/**
 * A gateway in front of one stand-in upstream that serves both engines of one tenant, acme:
 * the set-up of the tests that look at what the gateway sends an upstream and makes of its
 * answer. `gateway` holds the gateway's other dependencies (a clock, a config).
 */
export async function gatewayOverUpstream(
  t: Teardown,
  opts: { handler?: Handler; gateway?: Partial<GatewayDeps> & { config?: Config } } = {},
): Promise<{ upstream: Upstream; acme: TestTenant; gw: StartedGateway }> {
  const upstream = await startUpstream(t, opts.handler)
  const acme = makeTenant('acme', { auth: upstream.url, rest: upstream.url })
  const gw = await startGateway(t, { ...opts.gateway, tenants: lookupOf(acme) })
  return { upstream, acme, gw }
}

export interface Response {
  status: number
  headers: http.IncomingHttpHeaders
  body: string
  json(): any
}

export interface RequestOptions {
  method?: string
  headers?: Record<string, string | string[]>
  body?: string | Buffer
  agent?: http.Agent | false
  /** The client's own address (any of 127.0.0.0/8 on loopback: another client). */
  localAddress?: string
}

/** One HTTP request on a fresh connection (unless an agent is given). */
export function request(url: string, opts: RequestOptions = {}): Promise<Response> {
  return new Promise((resolve, reject) => {
    // The path is sent byte for byte (a URL object would normalise `..` and `%2e`).
    const m = /^http:\/\/([^/:]+):(\d+)(\/.*)?$/.exec(url)
    if (!m) throw new Error(`not an http URL: ${url}`)
    const req = http.request(
      {
        host: m[1],
        port: Number(m[2]),
        path: m[3] ?? '/',
        method: opts.method ?? 'GET',
        headers: opts.headers,
        agent: opts.agent ?? false,
        localAddress: opts.localAddress,
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('error', reject)
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8')
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body) })
        })
      },
    )
    req.on('error', reject)
    if (opts.body !== undefined) req.write(opts.body)
    req.end()
  })
}

export interface SignOpts {
  secret?: string
  alg?: string
  iss?: string | null
  aud?: string | null
  expiresIn?: number | null
  now?: number
}

/** A token as this tenant's auth engine would issue it; every part overridable. */
export async function signToken(tt: TestTenant, claims: JWTPayload = {}, o: SignOpts = {}): Promise<string> {
  const now = o.now ?? Math.floor(Date.now() / 1000)
  const body: JWTPayload = { sub: randomBytes(8).toString('hex'), role: 'authenticated', ...claims }
  let jwt = new SignJWT(body).setProtectedHeader({ alg: o.alg ?? 'HS256', typ: 'JWT' }).setIssuedAt(now)
  const iss = o.iss === undefined ? tenantIssuer(tt.tenant, PUBLIC_URL) : o.iss
  if (iss !== null) jwt = jwt.setIssuer(iss)
  const aud = o.aud === undefined ? tt.tenant.jwt.aud : o.aud
  if (aud !== null) jwt = jwt.setAudience(aud)
  const exp = o.expiresIn === undefined ? 3600 : o.expiresIn
  if (exp !== null) jwt = jwt.setExpirationTime(now + exp)
  return jwt.sign(new TextEncoder().encode(o.secret ?? tt.file.jwt.secret))
}

/** The JSON error body shape every gateway refusal has. */
export function errorShape(body: any): { code: string; message: string; details: string | null; hint: string | null } {
  return { code: body.code, message: body.message, details: body.details, hint: body.hint }
}
