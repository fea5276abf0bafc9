// The panel refuses provider URLs our processes would fetch (issuer, token_url,
// userinfo_url) unless they are https at public addresses: 400 naming the field and the
// reason, nothing stored. Hosts the operator lists in outbound.allow_hosts pass.
import t from 'tap'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant
let token: string
const path = () => `/organizations/org_out/databases/${x.database}/api/auth-settings`
const patch = (body: unknown) => stack.panel('PATCH', path(), { token, body })

t.before(async () => {
  stack = await startStack(t, { overrides: { outbound: { allow_hosts: [] } } })
  x = await stack.addTenant({ organization: 'org_out' })
  token = await stack.panelSession({ userId: 'p1', orgs: ['org_out'] })
})

t.test('loopback, private, link-local, metadata and plain http are refused, naming the field', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['issuer', 'http://127.0.0.1:9/', /providers\.evil\.issuer: only https is allowed/],
    [
      'issuer',
      'https://127.0.0.1:9/',
      /providers\.evil\.issuer: 127\.0\.0\.1 resolves to 127\.0\.0\.1, a loopback address; list the host in outbound\.allow_hosts/,
    ],
    ['issuer', 'https://localhost/', /providers\.evil\.issuer: localhost resolves to .*a loopback address/],
    [
      'token_url',
      'https://169.254.169.254/latest/meta-data/',
      /providers\.evil\.token_url: .*link-local or cloud metadata/,
    ],
    ['token_url', 'https://10.0.0.5/token', /providers\.evil\.token_url: .*a private address/],
    ['token_url', 'https://100.64.1.1/token', /carrier-grade NAT/],
    ['userinfo_url', 'https://[::1]/me', /providers\.evil\.userinfo_url: .*loopback/],
    ['userinfo_url', 'https://[::ffff:127.0.0.1]/me', /providers\.evil\.userinfo_url: .*loopback/],
    ['userinfo_url', 'https://[fd00:ec2::254]/me', /providers\.evil\.userinfo_url: .*unique local/],
    ['userinfo_url', 'https://[::ffff:0:a9fe:a9fe]/me', /providers\.evil\.userinfo_url: .*cloud metadata/],
    ['userinfo_url', 'https://[64:ff9b:1::a9fe:a9fe]/me', /providers\.evil\.userinfo_url: .*local-use NAT64/],
    ['userinfo_url', 'ftp://example.com/me', /providers\.evil\.userinfo_url: scheme ftp: is not allowed/],
  ]
  for (const [field, url, why] of cases) {
    const r = await patch({
      providers: {
        evil: {
          client_id: 'c',
          secret: 's',
          authorize_url: 'https://id.example.com/authorize',
          token_url: 'https://93.184.215.14/token',
          userinfo_url: 'https://93.184.215.14/me',
          [field]: url,
        },
      },
    })
    t.equal(r.status, 400, `${field} = ${url}: 400`)
    t.equal(r.body.code, 'validation_failed')
    t.match(r.body.message, why, `${field} = ${url}`)
  }
  const stored = await stack.panelStore.get(x.database)
  t.notOk(stored?.auth.providers.evil, 'nothing was stored')
})

t.test('a public https provider is stored', async (t) => {
  const r = await patch({
    providers: {
      fine: {
        client_id: 'c',
        secret: 's',
        authorize_url: 'https://id.example.com/authorize',
        token_url: 'https://93.184.215.14/token',
        userinfo_url: 'https://93.184.215.14/me',
      },
    },
  })
  t.equal(r.status, 200, JSON.stringify(r.body))
  t.equal(r.body.settings.providers.fine.token_url, 'https://93.184.215.14/token')
})

t.test('hosts the operator allows pass', async (t) => {
  const allowing = await startStack(t, { overrides: { outbound: { allow_hosts: ['127.0.0.1'] } } })
  const y = await allowing.addTenant({ organization: 'org_out' })
  const r = await allowing.panel('PATCH', `/organizations/org_out/databases/${y.database}/api/auth-settings`, {
    token: await allowing.panelSession({ userId: 'p1', orgs: ['org_out'] }),
    body: { providers: { local: { client_id: 'c', secret: 's', issuer: 'http://127.0.0.1:9' } } },
  })
  t.equal(r.status, 200, JSON.stringify(r.body))
})
