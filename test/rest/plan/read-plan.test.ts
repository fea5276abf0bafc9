// Planner tests (pure): a schema cache built from synthetic catalog rows, then requests
// planned against it: relationship resolution (hints, self references, one-to-one,
// many-to-many), and the PGRST2xx / PGRST1xx errors raised before any SQL exists.
import t from 'tap'
import { buildSchemaCache, type SchemaCache } from '../../../src/rest/schema-cache/index.js'
import { parseApiRequest } from '../../../src/rest/api-request/index.js'
import { planAction, type ReadPlan } from '../../../src/rest/plan/index.js'
import { isGatehouseError } from '../../../src/shared/index.js'

let oid = 100
const relations: Array<Record<string, unknown>> = []
const columns: Array<Record<string, unknown>> = []
const constraints: Array<Record<string, unknown>> = []
const oids = new Map<string, number>()

function table(name: string, cols: Array<[string, string]>, pk: string[] = [], kind = 'r'): void {
  const o = ++oid
  oids.set(name, o)
  relations.push({ oid: o, schema: 'public', name, kind, mask: 28, description: null })
  cols.forEach(([c, type], i) =>
    columns.push({
      rel: o,
      name: c,
      num: i + 1,
      type,
      base_type: type,
      nullable: true,
      default_expr: null,
      generated: false,
      description: null,
    }),
  )
  if (pk.length) constraints.push({ name: `${name}_pkey`, type: 'p', rel: o, frel: 0, cols: pk, fcols: [] })
}
function fk(name: string, from: string, cols: string[], to: string, fcols: string[]): void {
  constraints.push({ name, type: 'f', rel: oids.get(from), frel: oids.get(to), cols, fcols })
}

table(
  'authors',
  [
    ['id', 'int4'],
    ['name', 'text'],
    ['data', 'jsonb'],
  ],
  ['id'],
)
table(
  'books',
  [
    ['id', 'int4'],
    ['title', 'text'],
    ['author_id', 'int4'],
    ['editor_id', 'int4'],
  ],
  ['id'],
)
table(
  'profiles',
  [
    ['author_id', 'int4'],
    ['bio', 'text'],
  ],
  ['author_id'],
)
table(
  'tags',
  [
    ['id', 'int4'],
    ['name', 'text'],
  ],
  ['id'],
)
table(
  'book_tags',
  [
    ['book_id', 'int4'],
    ['tag_id', 'int4'],
  ],
  ['book_id', 'tag_id'],
)
table(
  'employees',
  [
    ['id', 'int4'],
    ['boss_id', 'int4'],
  ],
  ['id'],
)
fk('books_author_id_fkey', 'books', ['author_id'], 'authors', ['id'])
fk('books_editor_id_fkey', 'books', ['editor_id'], 'authors', ['id'])
fk('profiles_author_id_fkey', 'profiles', ['author_id'], 'authors', ['id'])
fk('book_tags_book_id_fkey', 'book_tags', ['book_id'], 'books', ['id'])
fk('book_tags_tag_id_fkey', 'book_tags', ['tag_id'], 'tags', ['id'])
fk('employees_boss_id_fkey', 'employees', ['boss_id'], 'employees', ['id'])

const cache: SchemaCache = buildSchemaCache(
  { relations, columns, constraints, views: new Map(), attnames: [], routines: [] },
  ['public'],
  1,
)

function plan(path: string, query: string, headers: Record<string, string> = {}): ReadPlan {
  return planAction(
    parseApiRequest({ method: 'GET', path, query, headers, body: null }, { schemas: ['public'] }),
    cache,
    { maxRows: null },
  ) as ReadPlan
}
function failure(fn: () => unknown): {
  code: string
  status: number
  message: string
  details: unknown
  hint: unknown
  wire: Record<string, unknown>
} {
  try {
    fn()
  } catch (err) {
    if (!isGatehouseError(err)) throw err
    return {
      code: err.code,
      status: err.status,
      message: err.message,
      details: err.details,
      hint: err.hint,
      wire: err.toWire(),
    }
  }
  throw new Error('expected a failure')
}

t.test('relationships resolve by table, constraint, column and hint', async (t) => {
  const child = (p: ReadPlan, i = 0) => p.tree.children[i]
  const byConstraint = plan('/books', 'select=books_author_id_fkey(name)')
  t.equal(child(byConstraint).relationship?.cardinality.kind, 'm2o')
  t.equal(child(byConstraint).aggAlias, 'books_books_author_id_fkey_1')
  const byColumn = plan('/books', 'select=editor_id(name)')
  t.same((child(byColumn).relationship?.cardinality as { constraint: string }).constraint, 'books_editor_id_fkey')
  const byHint = plan('/books', 'select=a:authors!editor_id(name)')
  t.same((child(byHint).relationship?.cardinality as { constraint: string }).constraint, 'books_editor_id_fkey')
  t.equal(child(byHint).aggAlias, 'books_a_1')
  t.equal(child(byHint).alias, 'authors_1')
  const toMany = plan('/authors', 'select=books!books_author_id_fkey(title)')
  t.equal(child(toMany).relationship?.cardinality.kind, 'o2m')
  const o2o = plan('/authors', 'select=profiles(bio)')
  t.same(child(o2o).relationship?.cardinality, {
    kind: 'o2o',
    constraint: 'profiles_author_id_fkey',
    columns: [['id', 'author_id']],
    isParent: true,
  })
  const m2m = plan('/books', 'select=tags(name)')
  t.equal(child(m2m).relationship?.cardinality.kind, 'm2m')
  t.equal(child(m2m).alias, null, 'many-to-many targets are not aliased')
  t.same(child(m2m).junction, { schema: 'public', name: 'book_tags' })
  const m2mHint = plan('/tags', 'select=books!book_tags(title)')
  t.equal(child(m2mHint).relationship?.cardinality.kind, 'm2m')
  const selfO2m = plan('/employees', 'select=employees(id)')
  t.equal(
    child(selfO2m).relationship?.cardinality.kind,
    'o2m',
    'self reference: the table name is the one-to-many side',
  )
  const selfM2o = plan('/employees', 'select=boss_id(id)')
  t.equal(child(selfM2o).relationship?.cardinality.kind, 'm2o', 'self reference: the column is the many-to-one side')
  const nested = plan('/authors', 'select=books!books_author_id_fkey(tags(name))')
  t.equal(nested.tree.children[0].children[0].aggAlias, 'books_tags_2')
})

t.test('PGRST200: no relationship', async (t) => {
  const e = failure(() => plan('/books', 'select=tags!nope(name)'))
  t.same(e.wire, {
    code: 'PGRST200',
    message: "Could not find a relationship between 'books' and 'tags' in the schema cache",
    details:
      "Searched for a foreign key relationship between 'books' and 'tags' using the hint 'nope' in the schema 'public', but no matches were found.",
    hint: null,
  })
  t.equal(e.status, 400)
  t.equal(failure(() => plan('/tags', 'select=authors(name)')).code, 'PGRST200')
})

t.test('PGRST201: ambiguous, status 300, details list the candidates', async (t) => {
  const e = failure(() => plan('/books', 'select=authors(name)'))
  t.equal(e.status, 300)
  t.same(e.wire, {
    code: 'PGRST201',
    message: "Could not embed because more than one relationship was found for 'books' and 'authors'",
    details: [
      {
        cardinality: 'many-to-one',
        embedding: 'books with authors',
        relationship: 'books_author_id_fkey using books(author_id) and authors(id)',
      },
      {
        cardinality: 'many-to-one',
        embedding: 'books with authors',
        relationship: 'books_editor_id_fkey using books(editor_id) and authors(id)',
      },
    ],
    hint: "Try changing 'authors' to one of the following: 'authors!books_author_id_fkey', 'authors!books_editor_id_fkey'. Find the desired relationship in the 'details' key.",
  })
})

t.test('PGRST205, PGRST108, PGRST118, PGRST123', async (t) => {
  const notFound = failure(() => plan('/nope', 'select=*'))
  t.same(
    [notFound.status, notFound.wire],
    [
      404,
      {
        code: 'PGRST205',
        message: "Could not find the table 'public.nope' in the schema cache",
        details: null,
        hint: null,
      },
    ],
  )
  const notEmbedded = failure(() => plan('/books', 'select=title&tags.name=eq.x'))
  t.same(
    [notEmbedded.status, notEmbedded.wire],
    [
      400,
      {
        code: 'PGRST108',
        message: "'tags' is not an embedded resource in this request",
        details: null,
        hint: "Verify that 'tags' is included in the 'select' query parameter.",
      },
    ],
  )
  t.equal(failure(() => plan('/books', 'select=title&tags.order=name')).code, 'PGRST108')
  t.equal(failure(() => plan('/books', 'select=title&tags.limit=1')).code, 'PGRST108')
  t.equal(failure(() => plan('/books', 'select=title&order=tags(name)')).code, 'PGRST108')
  const toMany = failure(() => plan('/books', 'select=title,tags(name)&order=tags(name)'))
  t.same(toMany.wire, {
    code: 'PGRST118',
    message: "A related order on 'tags' is not possible",
    details: "'books' and 'tags' do not form a many-to-one or one-to-one relationship",
    hint: null,
  })
  t.equal(failure(() => plan('/books', 'select=count()')).code, 'PGRST123')
  t.equal(failure(() => plan('/books', 'select=id.sum()')).code, 'PGRST123')
})

t.test('scoped parameters land on their node; legacy table names reach aliased embeds', async (t) => {
  const p = plan(
    '/books',
    'select=id,w:authors!author_id(id,name)&w.name=eq.x&authors.id=gt.1&w.order=name&w.limit=3&w.offset=1&w.or=(id.eq.1,id.eq.2)',
  )
  const w = p.tree.children[0]
  t.equal(w.where.length, 3)
  t.equal(w.order.length, 1)
  t.same(w.range, { offset: 1, limit: 3 })
  const nullEmbed = plan('/books', 'select=id,tags(id)&tags=not.is.null')
  t.same(
    nullEmbed.tree.where.map((c) => c.kind === 'null-embed' && [c.notNull, c.aggAlias]),
    [[true, 'books_tags_1']],
  )
  const inOr = plan('/books', 'select=id,tags(id)&or=(tags.is.null,id.eq.1)')
  t.same(
    (inOr.tree.where[0] as unknown as { children: Array<{ kind: string }> }).children.map((c) => c.kind),
    ['null-embed', 'filter'],
  )
  const jsonField = plan('/authors', 'select=data->a,name->x&data->>b=eq.1')
  t.same(
    jsonField.tree.select.map((s) => [s.alias, s.field.toJson]),
    [
      ['a', false],
      ['x', true],
    ],
    'json columns need no to_jsonb',
  )
})

t.test('max rows caps the top-level range, as db-max-rows', async (t) => {
  const planned = (query: string, headers: Record<string, string> = {}, maxRows: number | null = null) =>
    planAction(
      parseApiRequest({ method: 'GET', path: '/books', query, headers, body: null }, { schemas: ['public'] }),
      cache,
      { maxRows },
    ) as ReadPlan
  t.same(planned('limit=1000').tree.range, { offset: 0, limit: 1000 })
  t.same(planned('limit=1000', { range: '0-9' }).tree.range, { offset: 0, limit: 10 }, "the caller's Range is smaller")
  t.same(planned('', {}, 50).tree.range, { offset: 0, limit: 50 }, 'max rows')
  t.same(planned('limit=20', {}, 50).tree.range, { offset: 0, limit: 20 })
  t.same(planned('limit=80&offset=5', {}, 50).tree.range, { offset: 5, limit: 50 })
})
