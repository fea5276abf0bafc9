// README.md and the docs work as written: the front page's first app (its SQL block as the
// owner of a freshly provisioned database, as a Supabase migration writes it; its JS block, only
// the URL and key placeholders replaced, on the Node of this test run against the real gateway
// of the development stack), then a signed-in user inserts and reads; docs/development.md's
// panel exchange and docs/panel-api.md's examples. A grant that leaves out the sequence of a bigserial
// column is refused with a hint that, run as is by the owner, fixes it.
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { startE2eStack, email, REPO_ROOT, type E2eStack, type E2eTenant } from './helpers/e2e-stack.js'
import { until } from './helpers/eventually.js'

// Whole development stacks start here: on a loaded machine that takes minutes, not seconds.
t.setTimeout(300_000)

const README = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8')
const DEVELOPMENT = readFileSync(path.join(REPO_ROOT, 'docs', 'development.md'), 'utf8')
const PANEL_API = readFileSync(path.join(REPO_ROOT, 'docs', 'panel-api.md'), 'utf8')

/** The text of `doc`'s section under `heading` (to the next heading of its level). */
function section(doc: string, heading: string): string {
  const start = doc.indexOf(`${heading}\n`)
  if (start < 0) throw new Error(`no "${heading}" section`)
  const next = doc.indexOf(`\n${heading.split(' ')[0]} `, start + 1)
  return doc.slice(start, next < 0 ? undefined : next)
}

/** The fenced blocks of one language in README's "A first app" (or another text), in order. */
function quickStartBlocks(lang: string, text = section(README, '## A first app')): string[] {
  const out: string[] = []
  const fence = new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm')
  for (const m of text.matchAll(fence)) out.push(m[1]!)
  return out
}

const PLACEHOLDER_URL = 'http://127.0.0.1:8000/demo'
const PLACEHOLDER_KEY = 'pk_dev_...'

/** Runs ES module code on this run's Node from the checkout (so bare imports resolve there). */
function runModule(code: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-'], {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d
    })
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d
    })
    child.once('error', reject)
    child.once('close', (c) => resolve({ code: c, stdout, stderr }))
    child.stdin.end(code)
  })
}

/**
 * Waits until the REST engine's schema cache has a table the owner just created (its reload
 * follows the DDL asynchronously), asking as the secret key's role, which reaches every table.
 */
async function visible(x: E2eTenant, table: string): Promise<void> {
  await until(
    async () => (await stack.gateway(x, `/rest/v1/${table}?select=*&limit=0`, { apikey: x.secret_key })).status === 200,
    `table ${table} becomes visible`,
    30_000,
  )
}

let stack: E2eStack
let demo: E2eTenant

t.before(async () => {
  stack = await startE2eStack(t, { source: 'files', prefix: 'readme' })
  demo = stack.tenant('demo')
})

t.test('the first app: SQL as the owner, the JS as an app, then a signed-in insert and read', async (t) => {
  const sql = quickStartBlocks('sql')
  const js = quickStartBlocks('js')
  t.equal(sql.length, 1, 'one SQL block')
  t.equal(js.length, 1, 'one JS block: the app')
  t.match(
    sql[0],
    /^grant select, insert on todos to authenticated;$/m,
    'a plain GRANT, as a Supabase migration writes it',
  )

  // Nothing is visible before the SQL runs (the README's claim about a fresh database).
  const before = await stack.gateway(demo, '/rest/v1/todos?select=id')
  t.equal(before.status, 404)
  t.equal(before.body.code, 'unknown_table')

  await stack.owner(demo, sql[0]!)
  await visible(demo, 'todos')

  t.ok(js[0]!.includes(`'${PLACEHOLDER_URL}'`), 'the JS names the demo URL placeholder')
  t.ok(js[0]!.includes(`'${PLACEHOLDER_KEY}'`), 'the JS names the public key placeholder')
  const code = js[0]!.replaceAll(PLACEHOLDER_URL, demo.url).replaceAll(PLACEHOLDER_KEY, demo.public_key)
  const run = await runModule(code)
  t.equal(run.code, 0, `the JS runs to the end${run.stderr ? ': ' + run.stderr : ''}`)
  t.equal(run.stderr, '', 'nothing on stderr')
  t.match(run.stdout, /^\[\s*\{\s*id: \d+,\s*title: 'try Gatehouse'\s*\}\s*\]\n$/, 'it prints the row it inserted')

  // Run again, as a reader trying it twice does: ada signs in and has two rows.
  const again = await runModule(code)
  t.equal(again.code, 0, `the JS runs again${again.stderr ? ': ' + again.stderr : ''}`)
  t.equal(again.stderr, '', 'nothing on stderr the second time')
  t.match(
    again.stdout,
    /^\[\s*\{\s*id: \d+,\s*title: 'try Gatehouse'\s*\},\s*\{\s*id: \d+,\s*title: 'try Gatehouse'\s*\}\s*\]\n$/,
    'the second run signs in and prints both rows',
  )
  await stack.owner(demo, 'DELETE FROM public.todos WHERE id <> (SELECT min(id) FROM public.todos)')

  // The user the README signed up signs in, writes and reads.
  const ada = stack.supabase(demo)
  const signIn = await ada.auth.signInWithPassword({ email: 'ada@example.com', password: 'correct horse' })
  t.error(signIn.error)
  const userId = signIn.data.user!.id
  const insert = await ada.from('todos').insert({ title: 'second' }).select('id, title, owner').single()
  t.error(insert.error, 'a signed-in insert')
  t.equal(insert.data?.owner, userId, 'owner defaults to auth.uid()')
  const read = await ada.from('todos').select('title').order('id')
  t.error(read.error)
  t.same(read.data, [{ title: 'try Gatehouse' }, { title: 'second' }], 'a signed-in read: both rows')

  // The policy keeps another user's rows out.
  const other = stack.supabase(demo)
  const signUp = await other.auth.signUp({ email: email('bob'), password: 'another password' })
  t.error(signUp.error)
  const theirs = await other.from('todos').select('title')
  t.error(theirs.error)
  t.same(theirs.data, [], 'another user sees none of them')
  const rows = await stack.owner(demo, 'SELECT count(*)::int AS n FROM public.todos WHERE owner = $1', [userId])
  t.equal(rows.rows[0].n, 2, 'both rows are in the table, owned by the user')
})

t.test('the panel exchange block runs as written and signs in a user of demo', async (t) => {
  const js = quickStartBlocks('js', DEVELOPMENT).find((b) => b.includes('/api/app-session'))!
  await visible(demo, 'todos')
  // The block reads .gatehouse/dev.json of the checkout and looks up the database named demo:
  // here the working copy's dev.json, whose demo has a name of its own.
  t.ok(js.includes("readFileSync('.gatehouse/dev.json', 'utf8')"), 'it reads dev.json')
  t.ok(js.includes("d.database === 'demo'"), 'it picks demo')
  const devJson = path.join(stack.copy.root, '.gatehouse', 'dev.json')
  const code = js
    .replace("'.gatehouse/dev.json'", JSON.stringify(devJson))
    .replace("d.database === 'demo'", `d.database === ${JSON.stringify(demo.database)}`)
  for (const round of ['first', 'second']) {
    const run = await runModule(code)
    t.equal(run.code, 0, `${round} exchange runs to the end${run.stderr ? ': ' + run.stderr : ''}`)
    t.equal(run.stderr, '', 'nothing on stderr')
    t.match(
      run.stdout,
      /^developer@gatehouse\.local true\n\[\]\n$/,
      `${round}: the panel user, signed in, sees no row of ada's`,
    )
  }

  // The curl form the README gives.
  const curl =
    /`curl -X POST <panel_url>(\/organizations\/org_demo\/databases\/demo\/api\/app-session)\s+-H "Authorization: Bearer <panel session>"`/.exec(
      DEVELOPMENT,
    )
  t.ok(curl, 'docs/development.md gives the curl form')
  const r = await stack.panel(
    'POST',
    curl![1]!.replace('org_demo', demo.organization).replace('/demo/', `/${demo.database}/`),
  )
  t.equal(r.status, 200)
  t.equal(r.body.expires_in, 3600)
  t.equal(r.body.url, demo.url)
  t.equal(r.body.user.email, 'developer@gatehouse.local')
  const again = await stack.panel(
    'POST',
    curl![1]!.replace('org_demo', demo.organization).replace('/demo/', `/${demo.database}/`),
  )
  t.equal(again.body.user.id, r.body.user.id, 'a repeated exchange finds the same user')
  const listed = await stack.gateway(demo, '/auth/v1/admin/users', { apikey: demo.secret_key, token: demo.secret_key })
  t.equal(listed.status, 200)
  t.equal(
    listed.body.users.filter((u: { email: string }) => u.email === 'developer@gatehouse.local').length,
    1,
    'one user for the panel member after four exchanges',
  )

  // The mail catcher's JSON list, as the README names it.
  t.match(DEVELOPMENT, /`GET <mail_url>\/email` lists them as JSON/)
  const mails = await fetch(`${stack.info.mail_url}/email`)
  t.equal(mails.status, 200)
  t.ok(Array.isArray(await mails.json()), 'GET <mail_url>/email is a JSON list')
})

t.test('platform.grant and sequences', async (t) => {
  const granted = await stack.owner(
    demo,
    "CREATE TABLE public.ids (id int GENERATED ALWAYS AS IDENTITY, n bigserial, v text); SELECT platform.grant('insert', 'public.ids', 'auth') AS stmt",
  )
  const stmt = (granted as unknown as Array<{ rows: Array<{ stmt: string }> }>)[1]!.rows[0]!.stmt
  t.match(stmt, /^GRANT INSERT ON TABLE public\.ids TO t_[0-9a-f]{10}_auth; /)
  t.match(stmt, /GRANT USAGE ON SEQUENCE public\.ids_id_seq TO /, "the identity column's sequence")
  t.match(stmt, /GRANT USAGE ON SEQUENCE public\.ids_n_seq TO /, "the bigserial column's sequence")
  const select = await stack.owner(demo, "SELECT platform.grant('SELECT', 'public.ids', 'auth') AS stmt")
  t.notMatch(select.rows[0].stmt, /SEQUENCE/, 'SELECT alone grants no sequence')
  const direct = await stack.owner(demo, "SELECT platform.grant('USAGE', 'public.ids_n_seq', 'anon') AS stmt")
  t.match(
    direct.rows[0].stmt,
    /^GRANT USAGE ON SEQUENCE public\.ids_n_seq TO t_[0-9a-f]{10}_anon$/,
    'a sequence by name',
  )
  await t.rejects(stack.owner(demo, "SELECT platform.grant('INSERT', 'public.ids_n_seq', 'anon')"), {
    message: /invalid privilege 'INSERT' for a sequence/,
  })
  await t.rejects(stack.owner(demo, "SELECT platform.grant('USAGE', 'public.ids', 'anon')"), {
    message: /invalid privilege 'USAGE' for a table/,
  })
})

t.test('a write refused for the sequence: the hint runs as is', async (t) => {
  // A GRANT of INSERT on the table alone (not through platform.grant): nextval() is refused.
  await stack.owner(
    demo,
    `CREATE TABLE public.notes (id bigserial PRIMARY KEY, body text);
    DO $$ BEGIN EXECUTE format('GRANT SELECT, INSERT ON public.notes TO %I', platform.role('auth')); END $$`,
  )
  await visible(demo, 'notes')
  const user = stack.supabase(demo)
  t.error((await user.auth.signUp({ email: email('carol'), password: 'a fine password' })).error)

  const refused = await user.from('notes').insert({ body: 'first' })
  t.equal(refused.status, 403)
  t.equal(refused.error?.code, 'permission_denied')
  t.match(refused.error?.message, /permission denied for sequence notes_id_seq/)
  t.equal(refused.error?.hint, 'GRANT USAGE ON SEQUENCE public.notes_id_seq TO authenticated;')

  await stack.owner(demo, refused.error!.hint!)
  const ok = await user.from('notes').insert({ body: 'first' }).select('body')
  t.error(ok.error, 'after the hint ran, the insert works')
  t.same(ok.data, [{ body: 'first' }])
})

t.test('the control-panel API example runs as docs/panel-api.md says', async (t) => {
  await visible(demo, 'todos')
  const api = PANEL_API
  const m =
    /curl -s -X POST http:\/\/127\.0\.0\.1:8001(\S+) \\\n\s+-H "Authorization: Bearer <panel session>" -H 'Content-Type: application\/json' \\\n\s+-d '(\{[^']*\})'/.exec(
      api,
    )
  t.ok(m, 'the curl example is there')
  const pathOf = m![1]!
    .replace('/org_demo/', `/${demo.organization}/`)
    .replace('/databases/demo/', `/databases/${demo.database}/`)
  const body = JSON.parse(m![2]!) as { sql: string; as: string }
  t.equal(body.as, 'anon')
  const anon = await stack.panel('POST', pathOf, { body })
  t.equal(anon.status, 404, 'as anon: 404')
  t.equal(anon.body.code, 'unknown_table')
  t.match(anon.body.message, /role anon/)
  const svc = await stack.panel('POST', pathOf, { body: { ...body, as: 'service_role' } })
  t.equal(svc.status, 200, 'as service_role: the rows')
  t.equal(svc.body.rolled_back, true)
  t.ok(svc.body.rows.length > 0)
  // Every call of the table answers (none is a 404 of the router).
  for (const [method, call] of [
    ['GET', 'policy-check'],
    ['GET', 'auth-settings'],
    ['GET', 'rest-settings'],
    ['GET', 'signing-keys'],
    ['GET', 'types/typescript'],
  ]) {
    t.ok(
      api.includes(`${method} /${call}`) || api.includes(`\`${method}\`, \`PATCH /${call}\``),
      `the table lists ${method} ${call}`,
    )
    const r = await stack.panel(method!, pathOf.replace('/test-query', `/${call}`))
    t.equal(r.status, 200, `${method} ${call}`)
  }
})

t.test(
  "docs/development.md's auth hook runs as written: its SQL as the owner, its PATCH, a claim in the token",
  async (t) => {
    const text = section(DEVELOPMENT, '## Auth hooks')
    const sql = quickStartBlocks('sql', text)
    t.equal(sql.length, 1, 'one SQL block')
    // As written, on a database that has none of its objects yet: each statement must run.
    const ran = await stack.owner(demo, sql[0]!).then(
      () => null,
      (err: Error) => err.message,
    )
    t.equal(ran, null, 'the SQL block runs as the owner as written')
    const m =
      /curl -X PATCH <panel_url>(\/organizations\/org_demo\/databases\/demo\/api\/auth-settings) -H "Authorization: Bearer <panel session>" \\\n\s+-H 'Content-Type: application\/json' -d '(\{[^']*\})'/.exec(
        text,
      )
    t.ok(m, 'the PATCH that turns the hook on is given')
    const patched = await stack.panel(
      'PATCH',
      m![1]!.replace('org_demo', demo.organization).replace('/demo/', `/${demo.database}/`),
      { body: JSON.parse(m![2]!) },
    )
    t.equal(patched.status, 200, 'the panel takes it')
    const claim = async (who: string): Promise<unknown> => {
      const client = stack.supabase(demo)
      const up = await client.auth.signUp({ email: email(who), password: 'a hooked password' })
      t.error(up.error)
      const token = up.data.session!.access_token
      return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { user_role?: unknown })
        .user_role
    }
    t.equal(await claim('hooked'), 'member', 'a new user gets "user_role": "member" in the access token')
  },
)
