// parseApiRequest (pure): routing of path + method to actions, profiles, Prefer, Range,
// Accept and content negotiation, with the PGRST error of each bad request.
import t from 'tap'
import {
  parseApiRequest,
  parsePreferences,
  parseRangeHeader,
  intersectRanges,
  parseAccept,
  type RawRequest,
} from '../../../src/rest/api-request/index.js'
import { negotiateRead } from '../../../src/rest/plan/index.js'
import { isGatehouseError } from '../../../src/shared/index.js'

const ctx = { schemas: ['public', 'extra'] }
function req(over: Partial<RawRequest> = {}): RawRequest {
  return { method: 'GET', path: '/books', query: '', headers: {}, body: null, ...over }
}
function failure(fn: () => unknown): {
  code: string
  status: number
  message: string
  details: unknown
  hint: unknown
} {
  try {
    fn()
  } catch (err) {
    if (!isGatehouseError(err)) throw err
    return { code: err.code, status: err.status, message: err.message, details: err.details, hint: err.hint }
  }
  throw new Error('expected a failure')
}

t.test('routing: path and method -> action', async (t) => {
  const cases: Array<[string, string, unknown]> = [
    ['GET', '/books', { kind: 'read', relation: 'books', headersOnly: false }],
    ['HEAD', '/books', { kind: 'read', relation: 'books', headersOnly: true }],
    ['GET', '/my%20table', { kind: 'read', relation: 'my table', headersOnly: false }],
    ['GET', '/a+b', { kind: 'read', relation: 'a+b', headersOnly: false }],
    ['POST', '/books', { kind: 'mutate', relation: 'books', mutation: 'insert' }],
    ['PATCH', '/books', { kind: 'mutate', relation: 'books', mutation: 'update' }],
    ['PUT', '/books', { kind: 'mutate', relation: 'books', mutation: 'single-upsert' }],
    ['DELETE', '/books', { kind: 'mutate', relation: 'books', mutation: 'delete' }],
    ['OPTIONS', '/books', { kind: 'info', resource: { kind: 'relation', name: 'books' } }],
    ['GET', '/rpc/fn', { kind: 'call', routine: 'fn', invoke: 'get' }],
    ['POST', '/rpc/fn', { kind: 'call', routine: 'fn', invoke: 'post' }],
    ['GET', '/', { kind: 'openapi', headersOnly: false }],
    ['GET', '', { kind: 'openapi', headersOnly: false }],
    ['OPTIONS', '/', { kind: 'info', resource: { kind: 'schema' } }],
  ]
  for (const [method, path, action] of cases)
    t.same(parseApiRequest(req({ method, path }), ctx).action, action, `${method} ${path}`)
  const errors: Array<[string, string, string, number, string]> = [
    ['GET', '/a/b', 'PGRST125', 404, 'Invalid path specified in request URL'],
    ['GET', '/rpc/fn/x', 'PGRST125', 404, 'Invalid path specified in request URL'],
    ['GET', '/books/', 'PGRST125', 404, 'Invalid path specified in request URL'],
    ['PUT', '/rpc/fn', 'PGRST101', 405, 'Cannot use the PUT method on RPC'],
    ['TRACE', '/books', 'PGRST117', 405, 'Unsupported HTTP method: TRACE'],
    ['DELETE', '/', 'PGRST117', 405, 'Unsupported HTTP method: DELETE'],
  ]
  for (const [method, path, code, status, message] of errors) {
    const e = failure(() => parseApiRequest(req({ method, path }), ctx))
    t.same([e.code, e.status, e.message], [code, status, message], `${method} ${path}`)
  }
})

t.test('profiles (Accept-Profile / Content-Profile)', async (t) => {
  const a = parseApiRequest(req(), { schemas: ['public'] })
  t.same([a.schema, a.echoProfile], ['public', false], 'one schema: no Content-Profile')
  const b = parseApiRequest(req(), ctx)
  t.same([b.schema, b.echoProfile], ['public', true], 'several schemas: echoed')
  const c = parseApiRequest(req({ headers: { 'accept-profile': 'extra' } }), ctx)
  t.equal(c.schema, 'extra')
  const e = failure(() => parseApiRequest(req({ headers: { 'accept-profile': 'private' } }), ctx))
  t.same(
    [e.code, e.status, e.message, e.hint],
    ['PGRST106', 406, 'Invalid schema: private', 'Only the following schemas are exposed: public, extra'],
  )
  const w = parseApiRequest(
    req({ method: 'POST', headers: { 'content-profile': 'extra', 'accept-profile': 'nope' } }),
    ctx,
  )
  t.equal(w.schema, 'extra', 'writes read Content-Profile')
})

t.test('Prefer', async (t) => {
  t.same(parsePreferences('count=exact'), {
    return: null,
    count: 'exact',
    resolution: null,
    missing: null,
    handling: null,
    tx: null,
    timezone: null,
    maxAffected: null,
    invalid: [],
  })
  const p = parsePreferences([
    'return=representation, count=planned',
    'count=exact, handling=strict, foo=bar, tx=rollback, timezone=UTC, max-affected=5, missing=default, resolution=merge-duplicates, params=single-object',
  ])
  t.same(
    p,
    {
      return: 'representation',
      count: 'planned',
      resolution: 'merge-duplicates',
      missing: 'default',
      handling: 'strict',
      tx: 'rollback',
      timezone: 'UTC',
      maxAffected: 5,
      invalid: ['foo=bar', 'params=single-object'],
    },
    'first value per family wins; unknown tokens are collected',
  )
})

t.test('Range and limit/offset', async (t) => {
  t.same(parseRangeHeader('0-9'), { offset: 0, limit: 10 })
  t.same(parseRangeHeader('5-'), { offset: 5, limit: null })
  t.equal(parseRangeHeader('bad'), null, 'malformed is ignored')
  const e = failure(() => parseRangeHeader('5-1'))
  t.same(
    [e.code, e.status, e.details],
    ['PGRST103', 416, 'The lower boundary must be lower than or equal to the upper boundary in the Range header.'],
  )
  t.same(intersectRanges({ offset: 0, limit: 10 }, { offset: 5, limit: 10 }), { offset: 5, limit: 5 })
  t.same(
    intersectRanges({ offset: 0, limit: 2 }, { offset: 5, limit: null }),
    { offset: 5, limit: 0 },
    'disjoint: limit 0',
  )
  const r = parseApiRequest(req({ query: 'limit=10&offset=2', headers: { range: '0-4', 'range-unit': 'items' } }), ctx)
  t.same(r.range, { offset: 2, limit: 3 }, 'Range intersected with limit/offset')
  const head = parseApiRequest(req({ method: 'HEAD', query: 'limit=10', headers: { range: '0-4' } }), ctx)
  t.same(head.range, { offset: 0, limit: 10 }, 'Range only on GET')
})

t.test('Accept and negotiation', async (t) => {
  t.same(
    parseAccept(undefined).map((m) => m.type),
    ['*/*'],
  )
  t.same(
    parseAccept('text/csv;q=0.5, application/json').map((m) => m.type),
    ['application/json', 'text/csv'],
  )
  t.equal(negotiateRead(parseAccept('application/vnd.pgrst.object+json')).kind, 'singular')
  t.equal(negotiateRead(parseAccept('application/vnd.pgrst.object')).kind, 'singular')
  t.same(negotiateRead(parseAccept('application/vnd.pgrst.object+json;nulls=stripped')), {
    kind: 'singular',
    stripNulls: true,
    contentType: 'application/vnd.pgrst.object+json;nulls=stripped; charset=utf-8',
  })
  t.same(negotiateRead(parseAccept('application/vnd.pgrst.array+json;nulls=stripped')).kind, 'json')
  t.equal(negotiateRead(parseAccept('text/csv')).kind, 'csv')
  t.equal(negotiateRead(parseAccept('text/unknowntype, application/json;q=0.1')).kind, 'json')
  const e = failure(() => negotiateRead(parseAccept('text/unknowntype, image/png')))
  t.same(
    [e.code, e.status, e.message],
    ['PGRST107', 406, 'None of these media types are available: text/unknowntype, image/png'],
  )
})

t.test('request.headers: lower-case, no credentials', async (t) => {
  const r = parseApiRequest(
    req({
      headers: { 'x-thing': 'a', authorization: 'Bearer x', cookie: 'a=b', apikey: 'k', accept: 'application/json' },
    }),
    ctx,
  )
  t.same(r.headers, { 'x-thing': 'a', accept: 'application/json' })
})
