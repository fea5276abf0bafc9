// Per-IP request limits of the auth engine (GoTrue's classes and defaults, set per tenant in
// auth.rate_limits): 429 over_request_rate_limit with Retry-After once a bucket is empty,
// counted per database and client IP; the client IP from X-Forwarded-For only when the peer
// is a trusted proxy; counters shared by engine processes through Redis; the e-mail limit's
// 429 with Retry-After. Real engine(s), real Postgres, real Redis, real sockets.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { buildAuthEngine } from '../../src/auth/index.js'
import { buildGateway } from '../../src/gateway/index.js'
import { loadConfig } from '../../src/config/index.js'
import { DEFAULT_RATE_LIMITS, type Tenant } from '../../src/tenants/index.js'
import { createTestTenant } from '../helpers/tenants.js'
import { createTestRedis } from '../helpers/redis.js'
import { startMailCatcher } from '../helpers/mail.js'
import { PUBLIC_URL, ROOMY_RATE_LIMITS, call, email, startAuth, type AuthHarness } from '../helpers/auth-harness.js'

const from = (ip: string) => ({ 'x-forwarded-for': ip })
let ipSeq = 10
/** A fresh documentation-range client address. */
const newIp = () => `198.51.100.${ipSeq++}`

/** Every bucket roomy except the given ones. */
const limits = (patch: Record<string, { capacity: number; rate?: number; interval_seconds?: number }>) => {
  const out: Record<string, unknown> = { ...ROOMY_RATE_LIMITS }
  for (const [k, v] of Object.entries(patch)) out[k] = { rate: 1, interval_seconds: 3600, ...v }
  return out as never
}

async function createUser(h: AuthHarness, x: Parameters<AuthHarness['base']>[0], address: string, password: string) {
  const r = await call(`${h.base(x)}/admin/users`, {
    body: { email: address, password, email_confirm: true },
    token: await h.serviceToken(x),
  })
  if (r.status !== 200) throw new Error(`admin create user: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body
}

t.test("wrong passwords hit 429 after GoTrue's burst, per database and client IP", async (t) => {
  // Both tenants keep GoTrue's defaults (no rate_limits in their files).
  const h = await startAuth(t, {
    tenants: [{ auth: { rate_limits: undefined } }, { auth: { rate_limits: undefined } }],
  })
  const [a, b] = h.list as [(typeof h.list)[0], (typeof h.list)[0]]
  t.strictSame(a.tenant.auth.rate_limits, DEFAULT_RATE_LIMITS, "the tenant file got GoTrue's defaults")
  const who = email('guess')
  await createUser(h, a, who, 'right-password-1')
  await createUser(h, b, who, 'right-password-1')

  const attacker = newIp()
  const signIn = (x: typeof a, password: string, ip: string, apiVersion?: string | null) =>
    call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password }, headers: from(ip), apiVersion })
  const burst = DEFAULT_RATE_LIMITS.sign_in_sign_up.capacity
  for (let i = 0; i < burst; i++) {
    const r = await signIn(a, `wrong-${i}`, attacker)
    if (r.status !== 400) {
      t.fail(`attempt ${i + 1}: ${r.status} ${JSON.stringify(r.body)}`)
      return
    }
  }
  const over = await signIn(a, 'wrong-again', attacker)
  t.equal(over.status, 429)
  t.strictSame(over.body, { code: 'over_request_rate_limit', message: 'Request rate limit reached' })
  t.equal(over.headers.get('x-sb-error-code'), 'over_request_rate_limit')
  const retry = Number(over.headers.get('retry-after'))
  t.ok(Number.isInteger(retry) && retry > 0 && retry <= 300, `Retry-After is a number of seconds (${retry})`)

  const legacy = await signIn(a, 'wrong-again', attacker, null)
  t.equal(legacy.status, 429)
  t.match(
    legacy.body,
    { code: 429, error_code: 'over_request_rate_limit', msg: 'Request rate limit reached' },
    'the pre-2024 body shape',
  )

  t.equal((await signIn(a, 'right-password-1', attacker)).status, 429, 'even the right password waits')
  t.equal((await signIn(a, 'right-password-1', newIp())).status, 200, 'another client IP has its own bucket')
  t.equal((await signIn(b, 'wrong', attacker)).status, 400, 'another database has its own bucket')
})

t.test("every class of GoTrue's limiter, each with its own bucket and the tenant's capacity", async (t) => {
  const h = await startAuth(t, {
    tenants: [
      {
        auth: {
          anonymous_sign_in: true,
          anonymous_rate_per_hour: 2,
          magic_link: true,
          rate_limits: limits({
            sign_in_sign_up: { capacity: 2 },
            token_refresh: { capacity: 2 },
            verify: { capacity: 2 },
            otp: { capacity: 3 },
          }),
        },
      },
    ],
  })
  const x = h.list[0]!
  const base = h.base(x)
  const existing = email('known')
  await createUser(h, x, existing, 'password-123')

  const expectBucket = async (
    name: string,
    capacity: number,
    make: (ip: string, i: number) => Promise<{ status: number; body: unknown }>,
  ) => {
    const ip = newIp()
    for (let i = 0; i < capacity; i++) {
      const r = await make(ip, i)
      if (r.status === 429) {
        t.fail(`${name}: request ${i + 1} already 429`)
        return
      }
    }
    const over = await make(ip, capacity)
    t.equal(over.status, 429, `${name}: 429 after ${capacity}`)
    t.match(over.body, { code: 'over_request_rate_limit' }, name)
  }

  await expectBucket('sign-up', 2, (ip) =>
    call(`${base}/signup`, { body: { email: email('new'), password: 'password-123' }, headers: from(ip) }),
  )
  await expectBucket('password sign-in', 2, (ip) =>
    call(`${base}/token?grant_type=password`, {
      body: { email: existing, password: 'password-123' },
      headers: from(ip),
    }),
  )
  // The class's setting, but each endpoint counts on its own (GoTrue: a limiter per endpoint).
  const busy = newIp()
  for (let i = 0; i < 3; i++)
    await call(`${base}/signup`, { body: { email: email('new'), password: 'password-123' }, headers: from(busy) })
  t.equal(
    (await call(`${base}/signup`, { body: { email: email('new'), password: 'password-123' }, headers: from(busy) }))
      .status,
    429,
  )
  t.equal(
    (
      await call(`${base}/token?grant_type=password`, {
        body: { email: existing, password: 'password-123' },
        headers: from(busy),
      })
    ).status,
    200,
    'sign-ups used up, sign-ins still served',
  )
  await expectBucket('refresh', 2, (ip) =>
    call(`${base}/token?grant_type=refresh_token`, { body: { refresh_token: 'abcdefabcdef' }, headers: from(ip) }),
  )
  await expectBucket('anonymous sign-in', 2, (ip) => call(`${base}/signup`, { body: {}, headers: from(ip) }))
  // GET and POST /verify share one bucket; an over-limit link answers JSON, as GoTrue's middleware does.
  await expectBucket('verify', 2, (ip, i) =>
    i % 2 === 0
      ? call(`${base}/verify?type=signup&token=${'a'.repeat(56)}`, { headers: from(ip) })
      : call(`${base}/verify`, { body: { type: 'signup', token_hash: 'b'.repeat(56) }, headers: from(ip) }),
  )
  const otpClass: Array<[string, (ip: string) => Promise<{ status: number; body: unknown }>]> = [
    ['otp', (ip) => call(`${base}/otp`, { body: { email: email('otp') }, headers: from(ip) })],
    ['magic link', (ip) => call(`${base}/magiclink`, { body: { email: email('ml') }, headers: from(ip) })],
    ['recover', (ip) => call(`${base}/recover`, { body: { email: existing }, headers: from(ip) })],
    ['resend', (ip) => call(`${base}/resend`, { body: { type: 'signup', email: existing }, headers: from(ip) })],
  ]
  for (const [name, make] of otpClass) await expectBucket(name, 3, make)
  // One IP that used up /otp is still served by /recover.
  const otpIp = newIp()
  for (let i = 0; i < 3; i++) await otpClass[0]![1](otpIp)
  t.equal((await otpClass[0]![1](otpIp)).status, 429)
  t.equal((await otpClass[2]![1](otpIp)).status, 200, '/recover counts apart from /otp')

  // PUT /user is in the OTP class too (it may send an email-change mail).
  const session = await call(`${base}/token?grant_type=password`, {
    body: { email: existing, password: 'password-123' },
    headers: from(newIp()),
  })
  t.equal(session.status, 200)
  await expectBucket('PUT /user', 3, (ip, i) =>
    call(`${base}/user`, {
      method: 'PUT',
      body: { data: { n: i } },
      token: session.body.access_token,
      headers: from(ip),
    }),
  )

  // A changed setting applies to the next request.
  h.setAuth(x, { rate_limits: limits({ verify: { capacity: 5 } }) })
  await expectBucket('verify after the tenant raised it', 5, (ip) =>
    call(`${base}/verify`, { body: { type: 'signup', token_hash: 'c'.repeat(56) }, headers: from(ip) }),
  )
})

t.test('the e-mail limit answers 429 over_email_send_rate_limit with Retry-After', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { mail_rate_per_hour: 1 } }] })
  const x = h.list[0]!
  const a = email('mail-a')
  const b = email('mail-b')
  await createUser(h, x, a, 'password-123')
  await createUser(h, x, b, 'password-123')
  t.equal((await call(`${h.base(x)}/recover`, { body: { email: a } })).status, 200)
  const over = await call(`${h.base(x)}/recover`, { body: { email: b } })
  t.equal(over.status, 429)
  t.strictSame(over.body, { code: 'over_email_send_rate_limit', message: 'email rate limit exceeded' })
  const retry = Number(over.headers.get('retry-after'))
  t.ok(retry > 3500 && retry <= 3600, `Retry-After until the first send leaves the hour (${retry})`)
})

t.test('X-Forwarded-For counts only from a trusted proxy', async (t) => {
  // The engine trusts one address that is not this test's: its X-Forwarded-For is ignored.
  const h = await startAuth(t, {
    auth: { trusted_proxies: ['192.0.2.1'] },
    tenants: [{ auth: { rate_limits: limits({ verify: { capacity: 2 } }) } }],
  })
  const x = h.list[0]!
  const verify = () =>
    call(`${h.base(x)}/verify`, { body: { type: 'signup', token_hash: 'a'.repeat(56) }, headers: from(newIp()) })
  t.equal((await verify()).status, 403)
  t.equal((await verify()).status, 403)
  const third = await verify()
  t.equal(third.status, 429, 'a new X-Forwarded-For on every request does not make a new client')
})

t.test('counters are shared by engine processes through Redis', async (t) => {
  const { redis, prefix, url } = createTestRedis(t)
  const h = await startAuth(t, {
    redis: { url, key_prefix: prefix },
    tenants: [{ auth: { rate_limits: limits({ verify: { capacity: 3 } }) } }],
  })
  const x = h.list[0]!
  const second = buildAuthEngine({ config: h.config, tenants: h.lookup })
  await second.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => second.close())
  const secondUrl = `http://127.0.0.1:${(second.server.address() as AddressInfo).port}/${x.database}`
  const ip = newIp()
  const verify = (base: string) =>
    call(`${base}/verify`, { body: { type: 'signup', token_hash: 'a'.repeat(56) }, headers: from(ip) })
  t.equal((await verify(h.base(x))).status, 403)
  t.equal((await verify(secondUrl)).status, 403)
  t.equal((await verify(h.base(x))).status, 403)
  const over = await verify(secondUrl)
  t.equal(over.status, 429, "the second process saw the first one's requests")
  t.ok(
    (await redis.keys(`${prefix}auth-rl:verify:*`)).length > 0,
    'the counter is in Redis under the configured prefix',
  )
})

t.test("through the gateway: the client's own X-Forwarded-For is replaced by its address", async (t) => {
  const mail = await startMailCatcher(t)
  const config = loadConfig({
    env: {},
    overrides: {
      public_url: PUBLIC_URL,
      log: { level: 'silent' },
      auth: { port: 0, bcrypt_cost: 4 },
      gateway: { port: 0 },
      mail: { smtp_host: mail.host, smtp_port: mail.port },
    },
  })
  const tenants = new Map<string, Tenant>()
  const lookup = { get: async (db: string) => tenants.get(db) ?? null }
  const engine = buildAuthEngine({ config, tenants: lookup })
  await engine.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => engine.close())
  const engineUrl = `http://127.0.0.1:${(engine.server.address() as AddressInfo).port}`
  const database = `tenant_${randomBytes(5).toString('hex')}`
  const tt = await createTestTenant(t, {
    database,
    upstreams: { auth: `${engineUrl}/${database}`, rest: `http://127.0.0.1:9/${database}` },
    auth: { rate_limits: limits({ verify: { capacity: 2 } }) },
  })
  tenants.set(database, tt.tenant)
  const gateway = buildGateway({ config, tenants: lookup })
  await gateway.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => gateway.close())
  const gw = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}/${database}/auth/v1`
  const verify = () =>
    call(`${gw}/verify`, {
      body: { type: 'signup', token_hash: 'a'.repeat(56) },
      headers: { apikey: tt.file.keys.public, ...from(newIp()) },
    })
  t.equal((await verify()).status, 403)
  t.equal((await verify()).status, 403)
  const over = await verify()
  t.equal(over.status, 429, "spoofed X-Forwarded-For values all count against the client's address")
  t.equal(over.headers.get('x-sb-error-code'), 'over_request_rate_limit')
  t.ok(over.headers.get('retry-after'), 'Retry-After reaches the client through the gateway')
})

t.test('supabase-js sees the 429 as an AuthApiError with its code', async (t) => {
  const h = await startAuth(t, { tenants: [{ auth: { rate_limits: limits({ sign_in_sign_up: { capacity: 1 } }) } }] })
  const x = h.list[0]!
  const client = h.client(x)
  const first = await client.signInWithPassword({ email: email('js'), password: 'not-the-password' })
  t.equal(first.error?.code, 'invalid_credentials')
  const second = await client.signInWithPassword({ email: email('js'), password: 'not-the-password' })
  t.equal(second.error?.status, 429)
  t.equal(second.error?.code, 'over_request_rate_limit')
  t.equal(second.error?.message, 'Request rate limit reached')
})
