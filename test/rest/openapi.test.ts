// The OpenAPI root (docs/rest-protocol.md §5.4): GET / of a tenant's REST base answers a Swagger 2.0
// document of the tables, views and functions the caller's role can use (follow-privileges),
// with methods by privilege, definitions with PK/FK notes and COMMENTs, function arguments,
// and host/basePath as a client behind the gateway reaches them. Real Postgres, inject.
import t from 'tap'
import { createWriteFixture } from '../helpers/rest-writes.js'
import { RPC_SQL } from '../helpers/rest-rpc.js'

t.test('OpenAPI root', async (t) => {
  const fx = await createWriteFixture(t, { sql: RPC_SQL + "SELECT platform.grant('SELECT', 'secrets', 'auth');" })

  const doc = async (role?: 'anon' | 'auth' | 'svc', headers: Record<string, string> = {}): Promise<any> => {
    const r = await fx.call('GET', '/', { role, headers })
    t.equal(r.status, 200)
    t.equal(r.headers['content-type'], 'application/openapi+json; charset=utf-8')
    return r.json()
  }

  t.test('anon: what anon can use, and nothing else', async (t) => {
    const d = await doc()
    t.equal(d.swagger, '2.0')
    t.equal(d.basePath, `/${fx.database}`)
    t.same(d.schemes, ['http'])
    t.ok(d.paths['/'].get, 'the root itself')
    t.same(Object.keys(d.paths['/items']).sort(), ['delete', 'get', 'patch', 'post'])
    t.same(Object.keys(d.paths['/books']), ['get'], 'SELECT only')
    t.same(Object.keys(d.paths['/insert_only']), ['post'], 'INSERT only')
    t.equal(d.paths['/secrets'], undefined, 'no privilege: not listed')
    t.equal(d.definitions.secrets, undefined)
    t.equal(d.paths['/rpc/secret_fn'], undefined, 'EXECUTE revoked: not listed')
    t.same(Object.keys(d.paths['/rpc/add_them']).sort(), ['get', 'post'])
    t.same(Object.keys(d.paths['/rpc/add_item']), ['post'], 'volatile: POST only')
    t.ok(d.paths['/item_names'].get, 'views too')
  })

  t.test('paths, parameters and definitions as PostgREST shapes them', async (t) => {
    const d = await doc()
    const get = d.paths['/items'].get
    t.same(get.tags, ['items'])
    t.equal(get.summary, 'Things in stock', 'from COMMENT ON TABLE')
    t.same(get.parameters.slice(0, 2), [
      { $ref: '#/parameters/rowFilter.items.id' },
      { $ref: '#/parameters/rowFilter.items.name' },
    ])
    t.same(
      get.parameters.slice(-7).map((p: any) => p.$ref),
      ['select', 'order', 'range', 'rangeUnit', 'offset', 'limit', 'preferCount'].map((n) => `#/parameters/${n}`),
    )
    t.same(get.responses['200'].schema, { type: 'array', items: { $ref: '#/definitions/items' } })
    t.same(d.paths['/items'].post.parameters, [
      { $ref: '#/parameters/body.items' },
      { $ref: '#/parameters/select' },
      { $ref: '#/parameters/preferPost' },
    ])
    t.same(d.paths['/items'].post.responses, { 201: { description: 'Created' } })

    const items = d.definitions.items
    t.equal(items.type, 'object')
    t.equal(items.description, 'Things in stock')
    // PostgREST's toSwaggerFormat: int32 / int64 for the integers (OpenApiSpec "integer to integer").
    t.same(items.properties.id, {
      format: 'int32',
      type: 'integer',
      description: 'Note:\nThis is a Primary Key.<pk/>',
    })
    t.same(items.properties.name, { format: 'text', type: 'string', description: 'What it is called' })
    t.same(items.properties.price, { format: 'numeric', type: 'number' })
    t.same(items.properties.tags, { type: 'array', format: 'text[]', items: { type: 'string' } })
    t.same(items.properties.qty, { format: 'int32', type: 'integer', default: 1 }, 'the default, as JSON')
    t.same(
      items.properties.note,
      { format: 'text', type: 'string', default: 'none' },
      'a text default without its cast',
    )
    t.same(items.properties.data, { format: 'jsonb' })
    t.same(items.properties.author_id, {
      format: 'int32',
      type: 'integer',
      description: "Note:\nThis is a Foreign Key to `authors.id`.<fk table='authors' column='id'/>",
    })
    // Every NOT NULL column, with a default or not (PostgREST's makeTableDef).
    t.same(items.required, ['id', 'name', 'qty'])
    t.same(d.definitions.kv.required, ['k'])
    t.same(d.parameters['rowFilter.items.price'], { name: 'price', required: false, in: 'query', type: 'string' })
    t.same(d.parameters['rowFilter.items.name'], {
      name: 'name',
      description: 'What it is called',
      required: false,
      in: 'query',
      type: 'string',
    })
    t.same(d.parameters['body.items'], {
      name: 'items',
      description: 'items',
      required: false,
      in: 'body',
      schema: { $ref: '#/definitions/items' },
    })
    t.same(d.parameters.preferPost.enum, [
      'return=representation',
      'return=minimal',
      'return=none',
      'resolution=ignore-duplicates',
      'resolution=merge-duplicates',
    ])

    const rpc = d.paths['/rpc/add_them']
    t.equal(rpc.post.summary, 'Adds two numbers')
    t.same(rpc.post.tags, ['(rpc) add_them'])
    t.same(rpc.post.parameters[0], {
      in: 'body',
      name: 'args',
      required: true,
      schema: {
        type: 'object',
        properties: { a: { format: 'int32', type: 'integer' }, b: { format: 'int32', type: 'integer' } },
        required: ['a', 'b'],
        description: 'Adds two numbers',
      },
    })
    t.same(rpc.get.parameters, [
      { in: 'query', name: 'a', required: true, format: 'int32', type: 'integer' },
      { in: 'query', name: 'b', required: true, format: 'int32', type: 'integer' },
    ])
    t.same(d.paths['/rpc/hello'].get.parameters, [
      { in: 'query', name: 'name', required: false, format: 'text', type: 'string' },
    ])
  })

  t.test('another role sees what it can use', async (t) => {
    const auth = await doc('auth')
    t.same(Object.keys(auth.paths['/secrets']), ['get'], 'SELECT granted to the signed-in role')
    t.ok(auth.definitions.secrets)
    const svc = await doc('svc')
    t.ok(svc.paths['/rpc/secret_fn'], "the secret key's role holds EXECUTE")
  })

  t.test('behind the gateway: host and basePath the client uses', async (t) => {
    const d = await doc(undefined, { 'x-forwarded-host': 'api.example.test', 'x-forwarded-proto': 'https' })
    t.equal(d.host, 'api.example.test')
    t.equal(d.basePath, `/${fx.database}/rest/v1`)
    t.same(d.schemes, ['https'])
  })

  t.test('HEAD, OPTIONS, negotiation, profiles', async (t) => {
    const h = await fx.call('HEAD', '/')
    t.equal(h.status, 200)
    t.equal(h.body, '')
    const o = await fx.call('OPTIONS', '/')
    t.equal(o.status, 200)
    t.equal(o.headers.allow, 'OPTIONS,GET,HEAD')
    const json = await fx.call('GET', '/', { headers: { accept: 'application/json' } })
    t.equal(json.status, 200)
    const csv = await fx.call('GET', '/', { headers: { accept: 'text/csv' } })
    t.equal(csv.status, 406)
    t.same(csv.json(), {
      code: 'PGRST107',
      message: 'None of these media types are available: text/csv',
      details: null,
      hint: null,
    })
    const prof = await fx.call('GET', '/', { headers: { 'accept-profile': 'private' } })
    t.equal(prof.status, 406)
    t.equal(prof.json().code, 'PGRST106')
    const bare = await fx.app.inject({ method: 'GET', url: `/${fx.database}` })
    t.equal(bare.statusCode, 200, 'without the trailing slash too')
    t.equal(JSON.parse(bare.body).swagger, '2.0')
  })
})
