// The policy check on a real tenant: always-true policies for authenticated, anon or PUBLIC
// are listed with the warning of docs/service.md §6, safe and restrictive ones are not; the panel
// route and `gatehouse tenants check <database>` (over the Redis tenant store) say the same.
import t from 'tap'
import { Command } from 'commander'
import { loadConfig } from '../../src/config/index.js'
import { buildPanel, signPanelSession } from '../../src/panel/index.js'
import { registerPanelCommands } from '../../src/panel/commands.js'
import { createRedisStore } from '../../src/tenants/index.js'
import { createTestTenant } from '../helpers/tenants.js'
import { createTestRedis } from '../helpers/redis.js'
import pg from 'pg'

const SECRET = 'policy-check-panel-secret-0123456789abcdef'

t.test('dangerous policies are found, safe ones are not; the CLI prints the same', async (t) => {
  const x = await createTestTenant(t, { organization: 'org_pc' })
  const clean = await createTestTenant(t, { organization: 'org_pc' })
  const owner = new pg.Client({ connectionString: x.ownerUrl })
  await owner.connect()
  t.teardown(() => owner.end())
  await owner.query(`
    CREATE TABLE public.posts (id int PRIMARY KEY, owner_id uuid);
    ALTER TABLE public.posts ENABLE ROW LEVEL SECURITY;
    CREATE POLICY "anyone signed in reads" ON public.posts FOR SELECT TO authenticated USING (true);
    CREATE POLICY own_posts ON public.posts FOR UPDATE TO authenticated USING (owner_id = auth.uid());
    CREATE POLICY never_mind ON public.posts AS RESTRICTIVE FOR SELECT TO authenticated USING (true);
    SELECT platform.grant('SELECT', 'public.posts', 'auth');

    CREATE TABLE public.comments (id int PRIMARY KEY, author uuid);
    ALTER TABLE public.comments ENABLE ROW LEVEL SECURITY;
    CREATE POLICY anyone_writes ON public.comments FOR INSERT TO ${'"' + x.roles.auth + '"'} WITH CHECK (true);
    CREATE POLICY own_comments ON public.comments FOR SELECT TO PUBLIC USING (author = auth.uid());

    CREATE TABLE public.feed (id int PRIMARY KEY);
    ALTER TABLE public.feed ENABLE ROW LEVEL SECURITY;
    CREATE POLICY open_feed ON public.feed FOR SELECT TO PUBLIC USING (true);
    CREATE POLICY role_only ON public.feed FOR DELETE TO PUBLIC USING (auth.role() = 'authenticated');
  `)
  const c2 = new pg.Client({ connectionString: clean.ownerUrl })
  await c2.connect()
  await c2.query(`CREATE TABLE public.safe (id int, owner_id uuid);
    ALTER TABLE public.safe ENABLE ROW LEVEL SECURITY;
    CREATE POLICY mine ON public.safe FOR SELECT TO authenticated USING (owner_id = auth.uid());`)
  await c2.end()

  const { url, prefix } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  await store.putAll([x.tenant, clean.tenant])
  const config = loadConfig({
    env: {},
    overrides: {
      log: { level: 'silent' },
      tenants: { source: 'redis' },
      redis: { url, key_prefix: prefix },
      panel: { session_secret: SECRET },
    },
  })
  const panel = buildPanel({ config, tenants: store })
  t.teardown(() => panel.close())
  const session = await signPanelSession({ secret: SECRET, userId: 'p1', orgs: ['org_pc'] })

  // 1. The panel route.
  const r = await panel.inject({
    method: 'GET',
    url: `/organizations/org_pc/databases/${x.database}/api/policy-check`,
    headers: { authorization: `Bearer ${session}` },
  })
  t.equal(r.statusCode, 200)
  const body = r.json()
  t.equal(body.database, x.database)
  const byName = Object.fromEntries(body.policies.map((p: { policy: string }) => [p.policy, p]))
  t.same(Object.keys(byName).sort(), ['anyone signed in reads', 'anyone_writes', 'open_feed', 'role_only'])
  t.equal(body.count, 4)

  const signedIn = byName['anyone signed in reads']
  t.match(signedIn, {
    schema: 'public',
    table: 'posts',
    command: 'SELECT',
    audience: 'authenticated',
    clause: 'USING',
    rls_enabled: true,
    granted: true,
  })
  t.match(signedIn.warning, 'says TO authenticated USING (true): it means "anyone signed in"')
  t.match(
    signedIn.warning,
    'Before a dedicated signed-in role existed, such a policy exposed the table to anyone holding the public key',
  )
  t.match(signedIn.warning, 'check that this meaning is intended')

  t.match(byName.anyone_writes, { table: 'comments', audience: 'authenticated', clause: 'WITH CHECK', granted: false })
  t.same(byName.anyone_writes.roles, [`${x.roles.auth} (authenticated)`])
  t.match(byName.anyone_writes.warning, 'may write any row')
  t.match(byName.open_feed, { audience: 'public' })
  t.match(byName.open_feed.warning, 'anyone holding the public key')
  t.match(byName.role_only, { audience: 'authenticated', command: 'DELETE' })

  const none = await panel.inject({
    method: 'GET',
    url: `/organizations/org_pc/databases/${clean.database}/api/policy-check`,
    headers: { authorization: `Bearer ${session}` },
  })
  t.same(none.json(), { database: clean.database, count: 0, policies: [] })

  // 2. `gatehouse tenants check <database>` over the same store.
  async function runCheck(args: string[]): Promise<{ out: string; exitCode: number | undefined }> {
    const program = new Command('gatehouse').exitOverride()
    registerPanelCommands(program.command('tenants'), () => config)
    const chunks: string[] = []
    const write = process.stdout.write
    const before = process.exitCode
    process.stdout.write = ((s: string) => {
      chunks.push(String(s))
      return true
    }) as typeof process.stdout.write
    let exitCode: number | undefined
    try {
      await program.parseAsync(['node', 'gatehouse', 'tenants', 'check', ...args])
    } finally {
      process.stdout.write = write
      exitCode = process.exitCode as number | undefined
      process.exitCode = before
    }
    return { out: chunks.join(''), exitCode }
  }
  const text = await runCheck([x.database])
  t.equal(text.exitCode, 1, 'exit code 1: something to review')
  t.match(text.out, `${x.database}: 4 policies to review`)
  for (const p of body.policies) t.match(text.out, p.warning)
  t.notMatch(text.out, 'own_posts')
  t.notMatch(text.out, 'never_mind')

  const json = await runCheck([x.database, '--json'])
  const { default_privileges: privileges, ...policies } = JSON.parse(json.out)
  t.same(policies, body)
  t.same(privileges, { setting: false, database: 'off' }, 'default privileges as the setting says')

  const ok = await runCheck([clean.database])
  t.match(ok.out, 'no always-true policies')
  t.not(ok.exitCode, 1)

  await t.rejects(runCheck(['nope']), /no tenant named "nope"/)
})
