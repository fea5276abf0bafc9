// Generated types on a real tenant database loaded with a schema of our own that has every
// shape the generator has a rule for (test/fixtures/typegen.sql):
// 1. the output is the TypeScript `supabase gen types typescript` writes for that schema
//    (fixtures/expected.types.txt, checked against postgres-meta's rules);
// 2. a supabase-js app compiles against it, and a wrong column in a select or an insert does not;
// 3. `gatehouse gen types typescript <database>` (tenant store) and `--db-url` print the same;
// 4. the panel's GET .../api/types/typescript answers `{ types }` for members of the owning
//    organization only, and `included_schemas` narrows it.
import t, { type Test } from 'tap'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Command } from 'commander'
import pg from 'pg'
import ts from 'typescript'
import { loadConfig } from '../../src/config/index.js'
import { buildPanel, signPanelSession } from '../../src/panel/index.js'
import { createRedisStore } from '../../src/tenants/index.js'
import { generateTypescriptTypes, registerGenCommands } from '../../src/typegen/index.js'
import { createTestRedis } from '../helpers/redis.js'
import { createTestTenant } from '../helpers/tenants.js'
import { sharedFixtureTenant } from '../helpers/shared-fixture.js'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '../..')
const EXPECTED = readFileSync(path.join(here, 'fixtures/expected.types.txt'), 'utf8')
const SECRET = 'typegen-panel-secret-0123456789abcdef'

async function loadedTenant(t: Test) {
  const x = await sharedFixtureTenant('typegen', { organization: 'org_types' })
  const owner = new pg.Client({ connectionString: x.ownerUrl })
  await owner.connect()
  t.teardown(() => owner.end())
  return { x, owner }
}

/** Type-checks `app` beside the generated `types` in a directory of the project (so it resolves supabase-js). */
function compile(t: Test, types: string, app: string): string[] {
  const dir = mkdtempSync(path.join(root, '.tap', 'typegen-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(path.join(dir, 'database.types.ts'), types)
  writeFileSync(path.join(dir, 'app.ts'), app)
  const program = ts.createProgram([path.join(dir, 'app.ts')], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    types: [],
  })
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
}

const APP_HEADER = `import { createClient } from '@supabase/supabase-js'
import type { Database, Tables, TablesInsert, Enums } from './database.types.js'
const supabase = createClient<Database>('http://127.0.0.1:8000/demo', 'pk_dev')
`

t.test('the output is what supabase gen types typescript writes for the schema', async (t) => {
  const { owner } = await loadedTenant(t)
  const out = await generateTypescriptTypes(owner, { schemas: ['public', 'inventory'] })
  t.equal(out, EXPECTED)
  const onlyInventory = await generateTypescriptTypes(owner, { schemas: ['inventory'] })
  t.match(onlyInventory, 'inventory: {')
  t.notMatch(onlyInventory, /^ {2}public: \{/m, 'schemas not asked for are left out')
  t.match(onlyInventory, 'mood: "sad" | "ok" | "happy" | null', 'an enum of a schema left out is written as its values')
  t.match(await generateTypescriptTypes(owner, { schemas: ['public', 'no_such_schema'] }), /^ {2}public: \{/m)
  await owner.query('SET search_path = pg_catalog')
  await generateTypescriptTypes(owner, { schemas: ['public'] })
  const search = await owner.query('SHOW search_path')
  t.equal(search.rows[0].search_path, 'pg_catalog', "the generator's own search path ended with its transaction")
})

t.test('a supabase-js app compiles against the generated type; a wrong column does not', async (t) => {
  const { owner } = await loadedTenant(t)
  const types = await generateTypescriptTypes(owner, { schemas: ['public', 'inventory'] })
  const good = compile(
    t,
    types,
    APP_HEADER +
      `
export async function app (): Promise<void> {
  const { data } = await supabase.from('books').select('id, title, authors(name, mood)').eq('author_id', 1)
  const title: string | undefined = data?.[0]?.title
  const author: string | undefined = data?.[0]?.authors.name
  const mood: Enums<'mood'> | null | undefined = data?.[0]?.authors.mood
  await supabase.from('books').insert({ author_id: 1, title: 'x' })
  const row: TablesInsert<'authors'> = { name: 'ada' }
  await supabase.from('authors').insert(row)
  const sum = await supabase.rpc('add', { a: 1, b: 2 })
  const n: number | null = sum.data
  const book: Tables<'books'>['price'] | undefined = (await supabase.from('books').select().single()).data?.price
  const first: string | undefined = (await supabase.rpc('first_book', { author: 1 })).data?.title
  const items = await supabase.schema('inventory').from('items').select('unit')
  const unit: 'piece' | 'kg' | undefined = items.data?.[0]?.unit
  void [title, author, mood, n, book, first, unit]
}
`,
  )
  t.same(good, [], 'no type errors')

  const badSelect = compile(
    t,
    types,
    APP_HEADER +
      `
export async function app (): Promise<string | undefined> {
  const { data } = await supabase.from('books').select('id, titel')
  return data?.[0]?.titel.toUpperCase()
}
`,
  )
  t.ok(badSelect.length > 0, 'a misspelt column in a select fails to compile')
  t.match(badSelect.join('\n'), /titel/)

  const badInsert = compile(
    t,
    types,
    APP_HEADER +
      `
export async function app (): Promise<void> {
  await supabase.from('books').insert({ author_id: 1, titel: 'x' })
}
`,
  )
  t.ok(badInsert.length > 0, 'a misspelt column in an insert fails to compile')
  t.match(badInsert.join('\n'), /titel/)

  const identity = compile(
    t,
    types,
    APP_HEADER +
      `
export async function app (): Promise<void> {
  await supabase.from('authors').insert({ id: 5, name: 'x' })
}
`,
  )
  t.ok(identity.length > 0, 'a GENERATED ALWAYS identity column cannot be inserted')
})

t.test('gatehouse gen types typescript and the panel route print the same', async (t) => {
  const { x, owner } = await loadedTenant(t)
  const other = await createTestTenant(t, { organization: 'org_elsewhere' })
  const { url, prefix } = createTestRedis(t)
  const store = createRedisStore({ url, prefix })
  t.teardown(() => store.close())
  await store.putAll([x.tenant, other.tenant])
  const config = loadConfig({
    env: {},
    overrides: {
      log: { level: 'silent' },
      tenants: { source: 'redis' },
      redis: { url, key_prefix: prefix },
      panel: { session_secret: SECRET },
    },
  })
  const expected = await generateTypescriptTypes(owner, { schemas: ['public'] })

  async function run(args: string[]): Promise<string> {
    const program = new Command('gatehouse').exitOverride()
    registerGenCommands(program, () => config)
    const chunks: string[] = []
    const write = process.stdout.write
    process.stdout.write = ((s: string) => {
      chunks.push(String(s))
      return true
    }) as typeof process.stdout.write
    try {
      await program.parseAsync(['node', 'gatehouse', 'gen', 'types', 'typescript', ...args])
    } finally {
      process.stdout.write = write
    }
    return chunks.join('')
  }
  t.equal(await run([x.database]), expected, "by database name: the tenant's exposed schemas (public)")
  t.equal(await run(['--db-url', x.ownerUrl, '--schema', 'public']), expected, 'by connection URL')
  t.match(await run([x.database, '--schema', 'public,inventory']), /^ {2}inventory: \{/m)
  await t.rejects(run(['nope']), /no tenant named "nope"/)
  await t.rejects(run(['Bad Name']), /is not a database name/)
  await t.rejects(run([]), /name a database/)

  const panel = buildPanel({ config, tenants: store })
  t.teardown(() => panel.close())
  const member = await signPanelSession({ secret: SECRET, userId: 'p1', orgs: ['org_types'] })
  const stranger = await signPanelSession({ secret: SECRET, userId: 'p2', orgs: ['org_elsewhere'] })
  const path1 = `/organizations/org_types/databases/${x.database}/api/types/typescript`
  const r = await panel.inject({ method: 'GET', url: path1, headers: { authorization: `Bearer ${member}` } })
  t.equal(r.statusCode, 200)
  t.same(r.json(), { types: expected })
  const narrowed = await panel.inject({
    method: 'GET',
    url: `${path1}?included_schemas=inventory`,
    headers: { authorization: `Bearer ${member}` },
  })
  t.match(narrowed.json().types, /^ {2}inventory: \{/m)
  t.notMatch(narrowed.json().types, /^ {2}public: \{/m)
  const refused = await panel.inject({ method: 'GET', url: path1, headers: { authorization: `Bearer ${stranger}` } })
  t.equal(refused.statusCode, 403)
  t.notMatch(refused.body, 'Tables')
  const crossOrg = await panel.inject({
    method: 'GET',
    url: `/organizations/org_elsewhere/databases/${x.database}/api/types/typescript`,
    headers: { authorization: `Bearer ${stranger}` },
  })
  t.ok(
    crossOrg.statusCode >= 400 && crossOrg.statusCode < 500,
    "a database of another organization is not reached through one's own",
  )
})
