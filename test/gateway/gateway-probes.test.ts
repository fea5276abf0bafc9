// What an attacker sends the gateway over a raw socket, and what a careless client sends:
// requests Node's HTTP parser refuses (Content-Length with Transfer-Encoding, bad chunks, two
// Content-Lengths, headers over the size limit, obfuscated Transfer-Encoding) answer in the
// JSON error shape with x-gatehouse-error-code and close the connection (no smuggled second
// request is served); a long filter whose canonical form the engine echoes in Content-Location
// is answered, not a 502; path tricks (encoded names, double slashes, dot segments, encoded
// dots, double-encoded dots) never reach another area or database; a spoofed X-Forwarded-For
// does not reset the sign-in limit when no proxy is trusted; tokens other than this
// database's own are refused.
import t from 'tap'
import net from 'node:net'
import http from 'node:http'
import { SignJWT, base64url } from 'jose'
import { startStack, gatewayCall, userToken, type Stack, type StackTenant } from '../helpers/panel-stack.js'
import { until } from '../helpers/eventually.js'

let stack: Stack
let x: StackTenant
let other: StackTenant
let port: number

/** Writes `data` on a fresh connection; resolves with everything read until the server closes it (send Connection: close). */
function raw(data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1')
    let out = ''
    s.setEncoding('utf8')
    s.on('data', (d: string) => {
      out += d
    })
    s.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ECONNRESET' || e.code === 'EPIPE') resolve(out)
      else reject(e)
    })
    s.on('close', () => resolve(out))
    s.setTimeout(10_000, () => {
      s.destroy()
      reject(new Error(`no close after 10 s; read ${JSON.stringify(out)}`))
    })
    // Not end(): a half-closed connection is a client that went away.
    s.write(data)
  })
}

function parse(response: string): { status: number; headers: Record<string, string>; body: any; count: number } {
  const count = response.match(/^HTTP\/1\.1 \d{3}/gm)?.length ?? 0
  const [head = '', ...rest] = response.split('\r\n\r\n')
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const l of lines) {
    const i = l.indexOf(':')
    headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim()
  }
  let body: any = rest.join('\r\n\r\n')
  try {
    body = JSON.parse(body)
  } catch {}
  return { status: Number(statusLine.split(' ')[1]), headers, body, count }
}

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({
    organization: 'org_gwp',
    auth: { rate_limits: { sign_in_sign_up: { capacity: 3, rate: 3, interval_seconds: 300 } } } as never,
  })
  other = await stack.addTenant({ organization: 'org_gwp2' })
  port = Number(new URL(stack.gatewayUrl).port)
  await stack.owner(
    x,
    `CREATE TABLE public.items (id int PRIMARY KEY, title text);
    INSERT INTO public.items SELECT g, 'item ' || g FROM generate_series(1, 3) g;
    SELECT platform.grant('SELECT, INSERT', 'public.items', 'anon')`,
  )
  await until(
    async () => (await gatewayCall(stack, x, '/rest/v1/items?select=id&limit=0')).status === 200,
    'the REST engine knows public.items',
    30_000,
  )
})

t.test('requests the HTTP parser refuses: JSON errors, connection closed, nothing smuggled', async (t) => {
  const key = x.file.keys.public
  const head = (extra: string) =>
    `POST /${x.database}/rest/v1/items HTTP/1.1\r\nHost: gw\r\napikey: ${key}\r\nContent-Type: application/json\r\n${extra}`
  const smuggled = `GET /${other.database}/rest/v1/ HTTP/1.1\r\nHost: gw\r\napikey: ${other.file.keys.public}\r\n\r\n`
  const cases: Array<[string, string, number, string]> = [
    [
      'Content-Length with Transfer-Encoding',
      head('Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n') + '0\r\n\r\n' + smuggled,
      400,
      'bad_request',
    ],
    [
      'obfuscated Transfer-Encoding',
      head('Transfer-Encoding: xchunked\r\n\r\n') + '0\r\n\r\n' + smuggled,
      400,
      'bad_request',
    ],
    [
      'two Transfer-Encodings',
      head('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n') + '0\r\n\r\n',
      400,
      'bad_request',
    ],
    [
      'a chunk size that is not hex',
      head('Transfer-Encoding: chunked\r\n\r\n') + 'zz\r\n{"id":9}\r\n0\r\n\r\n' + smuggled,
      400,
      'bad_request',
    ],
    [
      'a chunk longer than its size',
      head('Transfer-Encoding: chunked\r\n\r\n') + '2\r\n{"id":9}\r\n0\r\n\r\n' + smuggled,
      400,
      'bad_request',
    ],
    [
      'two Content-Lengths',
      head('Content-Length: 8\r\nContent-Length: 0\r\n\r\n') + '{"id":9}' + smuggled,
      400,
      'bad_request',
    ],
    ['a negative Content-Length', head('Content-Length: -1\r\n\r\n'), 400, 'bad_request'],
    [
      'a space before the colon',
      `GET /${x.database}/rest/v1/items HTTP/1.1\r\nHost: gw\r\napikey : ${key}\r\n\r\n`,
      400,
      'bad_request',
    ],
    [
      'a bare CR in a header',
      `GET /${x.database}/rest/v1/items HTTP/1.1\r\nHost: gw\r\nx-a: a\rb\r\n\r\n`,
      400,
      'bad_request',
    ],
    [
      '70 KB of one header',
      `GET /${x.database}/rest/v1/items HTTP/1.1\r\nHost: gw\r\nx-a: ${'a'.repeat(70_000)}\r\n\r\n`,
      431,
      'header_fields_too_large',
    ],
    [
      '3,000 headers',
      `GET /${x.database}/rest/v1/items HTTP/1.1\r\nHost: gw\r\n` +
        Array.from({ length: 3000 }, (_, i) => `x-h${i}: v`).join('\r\n') +
        '\r\n\r\n',
      431,
      'header_fields_too_large',
    ],
    [
      'a 100 KB query string',
      `GET /${x.database}/rest/v1/items?select=${'id,'.repeat(33_000)}id HTTP/1.1\r\nHost: gw\r\napikey: ${key}\r\n\r\n`,
      431,
      'header_fields_too_large',
    ],
  ]
  for (const [name, data, status, code] of cases) {
    const r = parse(await raw(data))
    t.equal(r.status, status, name)
    t.equal(r.count, 1, `${name}: one response, nothing smuggled after it`)
    t.equal(r.headers['x-gatehouse-error-code'], code, `${name}: the code header`)
    t.match(r.headers['content-type'], /^application\/json/, `${name}: JSON`)
    t.equal(r.body.code, code, `${name}: the code`)
    t.type(r.body.message, 'string')
    t.ok('details' in r.body && 'hint' in r.body, `${name}: the documented shape`)
  }
  const rows = await stack.owner(x, 'SELECT count(*)::int AS n FROM public.items')
  t.equal(rows.rows[0].n, 3, 'no refused body was inserted')
})

t.test("bodies fastify's parsers refuse answer as before: 404 off-route, GoTrue's 400 on auth", async (t) => {
  const xml = { 'content-type': 'text/xml' }
  const off = await fetch(`${stack.gatewayUrl}/nowhere`, { method: 'POST', headers: xml, body: '<a/>' })
  t.same([off.status, ((await off.json()) as { code: string }).code], [404, 'not_found'])
  const bad = await fetch(`${stack.gatewayUrl}/nowhere`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{',
  })
  t.same([bad.status, ((await bad.json()) as { code: string }).code], [404, 'not_found'])
  const auth = await fetch(`${stack.gatewayUrl}/${x.database}/auth/v1/token?grant_type=password`, {
    method: 'POST',
    headers: { ...xml, apikey: x.file.keys.public },
    body: '<a/>',
  })
  t.same([auth.status, ((await auth.json()) as { error_code: string }).error_code], [400, 'bad_json'])
})

t.test('a long in-list filter is answered, not a 502', async (t) => {
  // ~11 KB of URL: the engine's Content-Location carries it re-encoded, about 3x as long
  // (Node's own clients read 16 KB of headers; browsers and curl read it).
  const ids = Array.from({ length: 2500 }, (_, i) => i).join(',')
  const r = await new Promise<{ status: number; body: string; location: string }>((resolve, reject) => {
    const req = http.get(
      `${stack.gatewayUrl}/${x.database}/rest/v1/items?select=id&id=in.(${ids})&order=id`,
      { headers: { apikey: x.file.keys.public }, maxHeaderSize: 256 * 1024 },
      (res) => {
        let body = ''
        res
          .setEncoding('utf8')
          .on('data', (d: string) => {
            body += d
          })
          .on('end', () =>
            resolve({ status: res.statusCode ?? 0, body, location: String(res.headers['content-location'] ?? '') }),
          )
      },
    )
    req.on('error', reject)
  })
  t.equal(r.status, 200)
  t.same(JSON.parse(r.body), [{ id: 1 }, { id: 2 }, { id: 3 }])
  t.ok(r.location.length > 16 * 1024, "the engine's long Content-Location came through")
})

t.test('path tricks stay in their database and area', async (t) => {
  const key = x.file.keys.public
  const get = async (p: string) => {
    const r = parse(await raw(`GET ${p} HTTP/1.1\r\nHost: gw\r\napikey: ${key}\r\nConnection: close\r\n\r\n`))
    return r
  }
  const db = x.database
  const encodedFirst = `%${db.charCodeAt(0).toString(16)}${db.slice(1)}`
  for (const [p, status, code] of [
    [`/${encodedFirst}/rest/v1/items`, 404, 'tenant_not_found'],
    [`/${db.toUpperCase()}/rest/v1/items`, 404, 'tenant_not_found'],
    [`//${db}/rest/v1/items`, 400, 'invalid_path'],
    [`/${db}/rest/v1//items`, 400, 'invalid_path'],
    [`/${db}/./rest/v1/items`, 400, 'invalid_path'],
    [`/${db}/rest/v1/../auth/v1/settings`, 400, 'invalid_path'],
    [`/${db}/rest/v1/%2e%2e/auth/v1/settings`, 400, 'invalid_path'],
    [`/${db}/rest/v1/%2E%2E%2Fauth/v1/settings`, 400, 'invalid_path'],
    [`/${db}/auth/v1/../../${other.database}/rest/v1/`, 400, 'invalid_path'],
    [`/${db}%2frest/v1/items`, 400, 'invalid_path'],
    [`/${db}/rest/v1/items%00`, 400, 'invalid_path'],
    [`/${db}/rest/v1\\..\\auth/v1/settings`, 400, 'invalid_path'],
    [`/${db}/REST/v1/items`, 404, 'not_found'],
    ['/__proto__/rest/v1/items', 404, 'tenant_not_found'],
    ['/constructor/rest/v1/items', 404, 'tenant_not_found'],
    ['/healthz', 404, 'not_found'],
    ['/metrics', 404, 'not_found'],
  ] as Array<[string, number, string]>) {
    const r = await get(p)
    t.equal(r.status, status, p)
    t.equal(r.body?.code, code, `${p}: ${code}`)
  }
  // Double-encoded dots are a table name for the REST engine, never a step up to /auth/v1.
  const dd = await get(`/${db}/rest/v1/%252e%252e/auth/v1/settings`)
  t.equal(dd.status, 404)
  t.notOk(dd.body && 'external' in dd.body, 'not the auth settings')
})

t.test('a spoofed X-Forwarded-For does not reset the sign-in limit', async (t) => {
  const statuses: number[] = []
  for (let i = 0; i < 5; i++) {
    const r = await gatewayCall(stack, x, '/auth/v1/token?grant_type=password', {
      method: 'POST',
      body: { email: `nobody${i}@example.com`, password: 'wrong password' },
      headers: {
        'x-forwarded-for': `203.0.113.${i + 1}`,
        'x-real-ip': `198.51.100.${i + 1}`,
        forwarded: `for=192.0.2.${i + 1}`,
      },
    })
    statuses.push(r.status)
  }
  t.same(statuses, [400, 400, 400, 429, 429], 'the socket address is the client: capacity 3, then 429')
})

t.test("tokens that are not this database's own", async (t) => {
  const sub = '6a7bb3b3-1da0-4f94-888d-a373aea8ff4d'
  const good = await userToken(x, sub)
  t.equal(
    (await gatewayCall(stack, x, '/rest/v1/items?select=id', { token: good })).status,
    200,
    'the control: a good token',
  )
  const claims = JSON.parse(Buffer.from(good.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>
  const hs = (c: Record<string, unknown>, secret: string) =>
    new SignJWT(c).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(secret))
  const forged: Array<[string, string]> = [
    ['alg none', `${base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${good.split('.')[1]}.`],
    ["another database's secret", await hs(claims, other.file.jwt.secret)],
    ["another database's token", await userToken(other, sub)],
    ['the upstream secret', await hs(claims, x.file.jwt.upstream_secret)],
    ['expired', await hs({ ...claims, exp: Math.floor(Date.now() / 1000) - 60 }, x.file.jwt.secret)],
    ['no exp', await hs(Object.fromEntries(Object.entries(claims).filter(([k]) => k !== 'exp')), x.file.jwt.secret)],
    ['wrong aud', await hs({ ...claims, aud: 'somebody-else' }, x.file.jwt.secret)],
    ['wrong iss', await hs({ ...claims, iss: 'http://evil.test/auth/v1' }, x.file.jwt.secret)],
    ['role postgres', await hs({ ...claims, role: 'postgres' }, x.file.jwt.secret)],
    ['role supabase_admin', await hs({ ...claims, role: 'supabase_admin' }, x.file.jwt.secret)],
    ["another database's role", await hs({ ...claims, role: other.roles.svc }, x.file.jwt.secret)],
    ["this database's svc role by name", await hs({ ...claims, role: x.roles.svc }, x.file.jwt.secret)],
    ['role __proto__', await hs({ ...claims, role: '__proto__' }, x.file.jwt.secret)],
    ['role constructor', await hs({ ...claims, role: 'constructor' }, x.file.jwt.secret)],
  ]
  for (const [name, token] of forged) {
    const r = await gatewayCall(stack, x, '/rest/v1/items?select=id', { token })
    t.equal(r.status, 401, `${name}: 401`)
    t.equal(r.body.code, 'invalid_token', name)
    t.notMatch(JSON.stringify(r.body), /at .*\.(ts|js):\d+/, `${name}: no stack trace`)
    const a = await gatewayCall(stack, x, '/auth/v1/user', { token })
    t.ok(a.status === 401 || a.status === 403, `${name} at /auth/v1/user: refused (${a.status})`)
  }
})
