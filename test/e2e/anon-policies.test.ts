// A policy `TO anon` under Gatehouse's roles (docs/supabase.md, "Policies TO anon"): this
// database's signed-in role is a member of its anon role (signing in only adds access), so a
// policy for `anon` lets signed-in users through as well, where Supabase's `authenticated` is
// not a member of `anon`. Written the way supabase-js's own integration suite sets up its todos
// (anonymous read of every row, each user reads and writes its own), then confined to callers
// without a user by `auth.role() = 'anon'`, which gives what Supabase gives.
import t from 'tap'
import type { SupabaseClient } from '@supabase/supabase-js'
import { email, startE2eStack, type E2eStack, type E2eTenant } from '../helpers/e2e-stack.js'
import { until } from '../helpers/eventually.js'

let stack: E2eStack
let a: E2eTenant

t.before(async () => {
  stack = await startE2eStack(t, { source: 'files', prefix: 'e2e_anonpol' })
  a = stack.tenant('demo')
})

const MIGRATION = `
  create table public.todos (
    id uuid primary key default gen_random_uuid(),
    task text not null,
    user_id uuid references auth.users (id)
  );
  alter table public.todos enable row level security;
  create policy "anonymous read" on public.todos for select to anon using (true);
  create policy "own read" on public.todos for select to authenticated using ((select auth.uid()) = user_id);
  create policy "own insert" on public.todos for insert to authenticated with check ((select auth.uid()) = user_id);
  grant all on table public.todos to anon, authenticated, service_role;
`

interface User {
  id: string
  client: SupabaseClient
  todo: string
}

async function signUpWithTodo(label: string): Promise<User> {
  const client = stack.supabase(a)
  const up = await client.auth.signUp({ email: email(label), password: 'correct horse 1' })
  if (up.error !== null || up.data.user === null) throw new Error(`sign-up failed: ${up.error?.message}`)
  const id = up.data.user.id
  const added = await client
    .from('todos')
    .insert({ task: `${label}'s`, user_id: id })
    .select('id')
    .single()
  if (added.error !== null) throw new Error(`insert failed: ${added.error.message}`)
  return { id, client, todo: added.data.id as string }
}

t.test('a policy TO anon lets signed-in users through; auth.role() confines it to anonymous callers', async (t) => {
  await stack.owner(a, MIGRATION)
  await until(
    async () => (await stack.gateway(a, '/rest/v1/todos?limit=0', { apikey: a.secret_key })).status === 200,
    'the REST engine sees public.todos',
  )
  const ada = await signUpWithTodo('ada')
  const bob = await signUpWithTodo('bob')

  const anonymous = await stack.supabase(a).from('todos').select('task').order('task')
  t.equal(anonymous.error, null)
  t.same(anonymous.data, [{ task: "ada's" }, { task: "bob's" }], 'the public key reads every row')

  const crossed = await ada.client.from('todos').select('task').eq('id', bob.todo).single()
  t.equal(crossed.error, null, 'ada passes the TO anon policy: her role is a member of anon')
  t.same(crossed.data, { task: "bob's" }, "and reads bob's row (under Supabase she would not)")
  const roles = await stack.owner<{ member: boolean }>(a, "select pg_has_role($1, 'anon', 'USAGE') as member", [
    a.roles.auth,
  ])
  t.equal(roles.rows[0].member, true, 'the signed-in role inherits the cluster role anon')

  await stack.owner(a, `alter policy "anonymous read" on public.todos using ((select auth.role()) = 'anon')`)
  const confined = await ada.client.from('todos').select('task').eq('id', bob.todo).single()
  t.equal(confined.data, null, "with auth.role() = 'anon' ada no longer reads bob's row")
  t.equal(confined.error?.code, 'PGRST116', 'single() finds no row, as under Supabase')
  const own = await ada.client.from('todos').select('task').eq('id', ada.todo).single()
  t.same(own.data, { task: "ada's" }, 'her own row through the authenticated policy')
  const still = await stack.supabase(a).from('todos').select('task').order('task')
  t.same(still.data, [{ task: "ada's" }, { task: "bob's" }], 'the public key still reads every row')
})
