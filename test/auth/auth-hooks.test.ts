// Auth hooks through the gateway with supabase-js, on real tenants (test/helpers/panel-stack.ts):
// 1. a Postgres custom access token hook adds a `user_role` claim that reaches SQL through the
//    gateway, so an RLS policy on auth.jwt()->>'user_role' decides;
// 2. an HTTP send_email hook gets the mail (signed with Standard Webhooks) and no SMTP mail goes out;
// 3. a before_user_created hook refuses a sign-up with its message and nothing is stored;
// 4. a password_verification_attempt hook rejects with its message;
// 5. a hook that fails answers as GoTrue does (never a bare 500);
// 6. hooks of one database never run for another.
import t, { type Test } from 'tap'
import { createHmac } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeJwt } from 'jose'
import { startStack, gatewayCall, type StackTenant, type Stack } from '../helpers/panel-stack.js'

const WEBHOOK_SECRET_BYTES = Buffer.from('a webhook secret of our own for tests, 32+ bytes long')
const WEBHOOK_SECRET = `v1,whsec_${WEBHOOK_SECRET_BYTES.toString('base64')}`

interface Received {
  headers: http.IncomingHttpHeaders
  body: string
}

/** An endpoint on loopback that records every call and answers `answer()`. */
async function hookEndpoint(t: Test, answer: (r: Received) => { status: number; type?: string; body?: string }) {
  const received: Received[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const r = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') }
      received.push(r)
      const a = answer(r)
      res.writeHead(a.status, a.type !== undefined ? { 'content-type': a.type } : {})
      res.end(a.body ?? '')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received }
}

const email = (label: string): string => `${label}-${Math.random().toString(36).slice(2, 10)}@example.com`

/** What the owner runs (docs/auth-hooks.md): EXECUTE for the database's hook role, PUBLIC's taken away. */
async function grantToAuthEngine(stack: Stack, x: StackTenant, fn: string): Promise<void> {
  const r = await stack.owner(x, 'SELECT platform.grant_hook($1::regprocedure) AS stmt', [`${fn}(jsonb)`])
  const hookRole = x.roles.authn.replace(/_authn$/, '_hook')
  if (!String(r.rows[0].stmt).includes(hookRole)) throw new Error("grant_hook did not name the database's hook role")
}

t.test('a Postgres custom access token hook adds a claim that RLS reads through the gateway', async (t) => {
  const stack = await startStack(t)
  const x = await stack.addTenant({
    auth: { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/custom_claims' } } },
  })
  const other = await stack.addTenant()
  await stack.owner(
    x,
    `
    CREATE TABLE public.user_roles (user_id uuid PRIMARY KEY, role text NOT NULL);
    CREATE FUNCTION public.custom_claims(event jsonb) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
    DECLARE r text;
    BEGIN
      SELECT role INTO r FROM public.user_roles WHERE user_id = (event->>'user_id')::uuid;
      RETURN jsonb_build_object('claims', jsonb_set(event->'claims', '{user_role}', to_jsonb(coalesce(r, 'member'))));
    END $$;
    CREATE TABLE public.notes (id int PRIMARY KEY, body text);
    ALTER TABLE public.notes ENABLE ROW LEVEL SECURITY;
    CREATE POLICY admins_read ON public.notes FOR SELECT TO PUBLIC USING (auth.jwt()->>'user_role' = 'admin');
    SELECT platform.grant('SELECT', 'public.notes', 'auth');
    INSERT INTO public.notes VALUES (1, 'for admins');
    SELECT platform.grant_hook('SELECT', 'public.user_roles');`,
  )
  await grantToAuthEngine(stack, x, 'public.custom_claims')

  const app = stack.supabase(x)
  const signUp = await app.auth.signUp({ email: email('hooked'), password: 'correct horse battery' })
  t.error(signUp.error)
  const session = signUp.data.session!
  t.equal(decodeJwt(session.access_token).user_role, 'member', "the hook's claim is in the access token")
  t.match(
    decodeJwt(session.access_token),
    { sub: session.user.id, role: 'authenticated', aal: 'aal1' },
    "GoTrue's claims are kept",
  )
  const asMember = await stack.supabase(x, 'public', session.access_token).from('notes').select('body')
  t.same(asMember.data, [], 'user_role=member: the policy lets nothing through')

  await stack.owner(x, 'INSERT INTO public.user_roles VALUES ($1, $2)', [session.user.id, 'admin'])
  const refreshed = await app.auth.refreshSession({ refresh_token: session.refresh_token })
  t.error(refreshed.error)
  const token = refreshed.data.session!.access_token
  t.equal(decodeJwt(token).user_role, 'admin', 'the refresh grant runs the hook too')
  const asAdmin = await stack.supabase(x, 'public', token).from('notes').select('body')
  t.same(asAdmin.data, [{ body: 'for admins' }], "the claim reached SQL through the gateway's upstream token")

  const plain = await stack.supabase(other).auth.signUp({ email: email('plain'), password: 'correct horse battery' })
  t.error(plain.error)
  t.equal(decodeJwt(plain.data.session!.access_token).user_role, undefined, "another database's tokens are not hooked")
})

t.test('platform.grant_hook grants only on what the owner owns', async (t) => {
  const stack = await startStack(t)
  const x = await stack.addTenant()
  await t.rejects(stack.owner(x, "SELECT platform.grant_hook('auth.uid()'::regprocedure)"), {
    message: /must be owner of function/,
  })
  await t.rejects(stack.owner(x, "SELECT platform.grant_hook('SELECT', 'auth.users')"), {
    message: /must be owner of table/,
  })
  await t.rejects(stack.owner(x, "SELECT platform.grant_hook('TRUNCATE', 'platform.roles')"), {
    message: /invalid privilege/,
  })
})

t.test('an HTTP send_email hook gets the mail instead of SMTP', async (t) => {
  const stack = await startStack(t)
  const endpoint = await hookEndpoint(t, () => ({ status: 200, type: 'application/json', body: '{}' }))
  const x = await stack.addTenant({
    auth: { mail_confirmation: true, hooks: { send_email: { uri: endpoint.url, secrets: [WEBHOOK_SECRET] } } },
  })
  const other = await stack.addTenant({ auth: { mail_confirmation: true } })
  const address = email('mailed')
  const before = stack.mail.mails.length
  const r = await stack.supabase(x).auth.signUp({ email: address, password: 'correct horse battery' })
  t.error(r.error)
  t.equal(endpoint.received.length, 1, 'the hook was called once')
  t.equal(stack.mail.mails.length, before, 'no SMTP mail was sent')
  const call = endpoint.received[0]!
  const payload = JSON.parse(call.body)
  t.match(payload, {
    metadata: { name: 'send-email' },
    user: { email: address, id: r.data.user!.id },
    email_data: { email_action_type: 'signup', redirect_to: String, site_url: String },
  })
  t.match(payload.email_data.token, /^\d{6}$/)
  // Standard Webhooks: base64 HMAC-SHA256 of "id.timestamp.body" with the secret's bytes.
  const expected = createHmac('sha256', WEBHOOK_SECRET_BYTES)
    .update(`${call.headers['webhook-id']}.${call.headers['webhook-timestamp']}.${call.body}`)
    .digest('base64')
  t.equal(call.headers['webhook-signature'], `v1,${expected}`, 'signed with the configured secret')
  const verified = await stack.supabase(x).auth.verifyOtp({ token_hash: payload.email_data.token_hash, type: 'signup' })
  t.error(verified.error, 'the token hash the hook got confirms the address')
  t.ok(verified.data.session)

  await stack.supabase(other).auth.signUp({ email: email('smtp'), password: 'correct horse battery' })
  t.equal(endpoint.received.length, 1, "another database's mail does not reach the hook")
  t.equal(stack.mail.mails.length, before + 1, 'and goes out by SMTP')
})

t.test('before_user_created refuses a sign-up with its message; password attempts can be rejected', async (t) => {
  const stack = await startStack(t)
  const x = await stack.addTenant({
    auth: {
      anonymous_sign_in: true,
      hooks: {
        before_user_created: { uri: 'pg-functions://postgres/public/check_signup' },
        password_verification_attempt: { uri: 'pg-functions://postgres/public/check_password' },
      },
    },
  })
  await stack.owner(
    x,
    `
    CREATE FUNCTION public.check_signup(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
      SELECT CASE WHEN event->'user'->>'email' LIKE '%@blocked.example'
        THEN jsonb_build_object('error', jsonb_build_object('http_code', 403, 'message', 'Sign-ups from blocked.example are closed'))
        ELSE '{}'::jsonb END $$;
    CREATE FUNCTION public.check_password(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
      SELECT CASE WHEN (event->>'valid')::boolean THEN jsonb_build_object('decision', 'continue')
        ELSE jsonb_build_object('decision', 'reject', 'message', 'Too many wrong passwords: try again in an hour') END $$;`,
  )
  await grantToAuthEngine(stack, x, 'public.check_signup')
  await grantToAuthEngine(stack, x, 'public.check_password')
  const app = stack.supabase(x)

  const refused = await app.auth.signUp({ email: 'eve@blocked.example', password: 'correct horse battery' })
  t.equal(refused.error?.status, 403)
  t.equal(refused.error?.message, 'Sign-ups from blocked.example are closed')
  const users = await stack.supabase(x, 'secret').auth.admin.listUsers()
  t.notOk(
    users.data.users.some((u) => u.email === 'eve@blocked.example'),
    'nothing was stored',
  )

  const address = email('allowed')
  const ok = await app.auth.signUp({ email: address, password: 'correct horse battery' })
  t.error(ok.error, 'other sign-ups go through')
  const anon = await app.auth.signInAnonymously()
  t.error(anon.error, 'an anonymous sign-in is a sign-up the hook allows')

  const wrong = await app.auth.signInWithPassword({ email: address, password: 'wrong password here' })
  t.equal(wrong.error?.status, 400)
  t.equal(wrong.error?.code, 'invalid_credentials')
  t.equal(wrong.error?.message, 'Too many wrong passwords: try again in an hour', "the hook's message")
  const right = await app.auth.signInWithPassword({ email: address, password: 'correct horse battery' })
  t.error(right.error, 'a right password continues')
})

t.test('a failing hook answers as GoTrue does', async (t) => {
  const stack = await startStack(t)
  const plainText = await hookEndpoint(t, () => ({ status: 200, type: 'text/plain', body: 'ok' }))
  const x = await stack.addTenant({
    auth: { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/bad_claims' } } },
  })
  const y = await stack.addTenant({
    auth: { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/raises' } } },
  })
  const z = await stack.addTenant({
    auth: { hooks: { custom_access_token: { uri: plainText.url, secrets: [WEBHOOK_SECRET] } } },
  })
  await stack.owner(
    x,
    `CREATE FUNCTION public.bad_claims(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_object('claims', (event->'claims') - 'email') $$;`,
  )
  await grantToAuthEngine(stack, x, 'public.bad_claims')
  await stack.owner(
    y,
    `CREATE FUNCTION public.raises(event jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'no claims today'; END $$;`,
  )
  await grantToAuthEngine(stack, y, 'public.raises')

  const signUp = (tenant: StackTenant) =>
    gatewayCall(stack, tenant, '/auth/v1/signup', {
      method: 'POST',
      body: { email: email('failing'), password: 'correct horse battery' },
      headers: { 'x-supabase-api-version': '2024-01-01' },
    })
  const bad = await signUp(x)
  t.equal(bad.status, 500)
  t.equal(bad.body.code, 'unexpected_failure')
  t.equal(bad.body.message, 'output claims do not conform to the expected schema: \n- (root): email is required\n')

  const raised = await signUp(y)
  t.equal(raised.status, 500)
  t.equal(raised.body.message, 'Error running hook URI: pg-functions://postgres/public/raises')
  t.notMatch(JSON.stringify(raised.body), 'no claims today', "the function's own error stays in the log")

  const text = await signUp(z)
  t.equal(text.status, 400)
  t.equal(text.body.code, 'hook_payload_invalid_content_type')
  t.equal(text.body.message, 'Invalid JSON response. Received content-type: text/plain')
  const users = await stack.supabase(x, 'secret').auth.admin.listUsers()
  t.equal(users.data.users.length, 0, 'a sign-up whose token failed is rolled back whole')
})

t.test("a hook's error never shows the hook URI's credentials or query", async (t) => {
  const stack = await startStack(t)
  // 10.0.0.1 is refused by the outbound guard (not in allow_hosts), so nothing is sent.
  const uri = 'https://hook-user:hook-pass@10.0.0.1/hook?token=s3cret-token#frag'
  const x = await stack.addTenant({
    auth: { hooks: { before_user_created: { uri, secrets: [WEBHOOK_SECRET] } } },
  })
  const r = await gatewayCall(stack, x, '/auth/v1/signup', {
    method: 'POST',
    body: { email: email('leak'), password: 'correct horse battery' },
    headers: { 'x-supabase-api-version': '2024-01-01' },
  })
  t.equal(r.status, 500)
  t.equal(r.body.code, 'unexpected_failure')
  t.equal(r.body.message, 'Error running hook URI: https://10.0.0.1/hook')
  for (const secret of ['s3cret-token', 'hook-pass', 'hook-user', 'frag'])
    t.notMatch(JSON.stringify(r.body), secret, `${secret} is not in the answer`)
})

t.test('an mfa_verification_attempt hook that rejects signs the user out with its message', async (t) => {
  const stack = await startStack(t)
  const x = await stack.addTenant({
    auth: { hooks: { mfa_verification_attempt: { uri: 'pg-functions://postgres/public/on_mfa' } } },
  })
  await stack.owner(
    x,
    `CREATE FUNCTION public.on_mfa(event jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT CASE WHEN (event->>'valid')::boolean THEN jsonb_build_object('decision', 'continue')
      ELSE jsonb_build_object('decision', 'reject', 'message', 'One wrong code is one too many') END $$;`,
  )
  await grantToAuthEngine(stack, x, 'public.on_mfa')
  const app = stack.supabase(x)
  const signUp = await app.auth.signUp({ email: email('mfa'), password: 'correct horse battery' })
  t.error(signUp.error)
  const session = signUp.data.session!
  const c = stack.supabase(x, 'public', session.access_token)
  const enrolled = await c.auth.mfa.enroll({ factorType: 'totp' })
  t.error(enrolled.error)
  const challenge = await c.auth.mfa.challenge({ factorId: enrolled.data!.id })
  t.error(challenge.error)
  const wrong = await c.auth.mfa.verify({
    factorId: enrolled.data!.id,
    challengeId: challenge.data!.id,
    code: '000000',
  })
  t.equal(wrong.error?.status, 403)
  t.equal(wrong.error?.code, 'mfa_verification_rejected')
  t.equal(wrong.error?.message, 'One wrong code is one too many')
  const refreshed = await app.auth.refreshSession({ refresh_token: session.refresh_token })
  t.ok(refreshed.error, 'the user was signed out everywhere: the refresh token no longer works')
})
