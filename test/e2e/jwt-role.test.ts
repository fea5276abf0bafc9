// The role claim in SQL (docs/supabase.md, "The role claim in SQL"): the gateway's upstream
// token carries this database's role name, and auth.jwt() answers it as Supabase apps compare
// it (anon, authenticated, service_role) with every other claim as the caller's token has them,
// the claims a custom access token hook adds included. supabase-js through the gateway, the
// REST and auth engines and a real tenant (test/helpers/panel-stack.ts).
import t from 'tap'
import { decodeJwt } from 'jose'
import { startStack, type Stack, type StackTenant } from '../helpers/panel-stack.js'

const SCHEMA = `
  CREATE FUNCTION public.custom_claims(event jsonb) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('claims', jsonb_set(event->'claims', '{plan}', '"pro"'))
  $$;
  SELECT platform.grant_hook('public.custom_claims(jsonb)');

  create table public.notes (id int primary key, body text not null);
  alter table public.notes enable row level security;
  create policy "signed-in users read" on public.notes for select to anon, authenticated
    using ((auth.jwt() ->> 'role') = 'authenticated');
  grant select on public.notes to anon, authenticated, service_role;
  insert into public.notes values (1, 'for members');

  create function public.purge_notes() returns text language plpgsql as $$
  begin
    if auth.jwt() ->> 'role' = 'service_role' then return 'purged'; end if;
    raise exception 'service role only';
  end $$;

  create function public.my_claims() returns jsonb language sql stable as $$
    select jsonb_build_object('jwt', auth.jwt(),
      'raw_role', current_setting('request.jwt.claims', true)::jsonb ->> 'role',
      'auth_role', auth.role())
  $$;
`

// Claims the gateway signs anew in its upstream token (docs/service.md §5): not the caller's values.
const RESIGNED = new Set(['exp', 'iat', 'nbf', 'jti', 'role'])

let stack: Stack
let x: StackTenant

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({
    auth: { hooks: { custom_access_token: { uri: 'pg-functions://postgres/public/custom_claims' } } },
  })
  await stack.owner(x, SCHEMA)
})

async function signUp(label: string): Promise<string> {
  const address = `${label}-${Math.random().toString(36).slice(2, 10)}@example.com`
  const r = await stack.supabase(x).auth.signUp({ email: address, password: 'correct horse battery' })
  if (r.error !== null || r.data.session === null) throw new Error(`sign-up failed: ${r.error?.message}`)
  return r.data.session.access_token
}

t.test("a policy on auth.jwt() ->> 'role' = 'authenticated' lets signed-in users read, not anon", async (t) => {
  const token = await signUp('reader')
  const user = await stack.supabase(x, 'public', token).from('notes').select('body')
  t.equal(user.error, null)
  t.same(user.data, [{ body: 'for members' }], 'the signed-in user reads')
  const anon = await stack.supabase(x).from('notes').select('body')
  t.equal(anon.error, null)
  t.same(anon.data, [], 'the public key alone reads nothing')
})

t.test("a function checking auth.jwt() ->> 'role' = 'service_role' works with the secret key", async (t) => {
  const svc = await stack.supabase(x, 'secret').rpc('purge_notes')
  t.equal(svc.error, null)
  t.equal(svc.data, 'purged')
  const token = await signUp('notadmin')
  for (const client of [stack.supabase(x), stack.supabase(x, 'public', token)]) {
    const refused = await client.rpc('purge_notes')
    t.match(refused.error, { code: 'P0001', message: 'service role only' }, 'refused for anon and for a user')
  }
})

t.test("auth.jwt() keeps the other claims: sub, email, app_metadata, a hook's claim", async (t) => {
  const token = await signUp('claims')
  const sent = decodeJwt(token)
  t.equal(sent.plan, 'pro', "the hook's claim is in the access token")
  const r = await stack.supabase(x, 'public', token).rpc('my_claims')
  t.equal(r.error, null)
  const {
    jwt,
    raw_role: rawRole,
    auth_role: authRole,
  } = r.data as {
    jwt: Record<string, unknown>
    raw_role: string
    auth_role: string
  }
  t.equal(jwt.role, 'authenticated', 'role as in the access token')
  t.match(jwt, {
    sub: sent.sub,
    email: sent.email,
    app_metadata: { provider: 'email', providers: ['email'] },
    plan: 'pro',
  })
  const kept = Object.keys(sent).filter((k) => !RESIGNED.has(k))
  t.same(
    Object.fromEntries(kept.map((k) => [k, jwt[k]])),
    Object.fromEntries(kept.map((k) => [k, sent[k]])),
    'every claim of the access token but those the gateway signs anew, unchanged',
  )
  t.equal(authRole, 'authenticated')
  t.equal(rawRole, x.roles.auth, "request.jwt.claims itself keeps this database's role name (as PostgREST sets it)")

  const anon = (await stack.supabase(x).rpc('my_claims')).data as { jwt: Record<string, unknown>; raw_role: string }
  t.equal(anon.jwt.role, 'anon', 'the public key alone: anon')
  t.same(Object.keys(anon.jwt).sort(), ['exp', 'iat', 'role'], 'and no other claims but the times')
  t.equal(anon.raw_role, x.roles.anon)
  const svc = (await stack.supabase(x, 'secret').rpc('my_claims')).data as { jwt: Record<string, unknown> }
  t.equal(svc.jwt.role, 'service_role', 'the secret key: service_role')
})
