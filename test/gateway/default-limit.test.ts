// The query rewrite on the way to the REST upstream, as a pure function: `?apikey=` taken
// out, `limit=<default>` added to table reads that have no top-level limit, larger limits
// capped at max_limit. Every case runs with and without a cap, so the fast paths and the
// general path are held to the same answers.
import t from 'tap'
import { rewriteQuery } from '../../src/gateway/request/default-limit.js'

const open = { default: 1000, max: null }
const capped = { default: 50, max: 200 }

t.test('with no cap: a top-level limit is kept, anything else gets the default', async (t) => {
  const cases: Array<[string, string, number | null]> = [
    ['', 'limit=1000', 1000],
    ['select=id', 'select=id&limit=1000', 1000],
    ['limit=20', 'limit=20', null],
    ['select=id&limit=20&offset=5', 'select=id&limit=20&offset=5', null],
    ['limit=50000', 'limit=50000', null],
    ['limit&select=id', 'limit&select=id', null],
    ['select=id&limit', 'select=id&limit', null],
    ['select=id&limit=', 'select=id&limit=', null],
    ['authors.limit=2', 'authors.limit=2&limit=1000', 1000],
    ['authors.limit=2&limit=5', 'authors.limit=2&limit=5', null],
    ['xlimit=3', 'xlimit=3&limit=1000', 1000],
    ['limits=3', 'limits=3&limit=1000', 1000],
    ['order=limit.desc', 'order=limit.desc&limit=1000', 1000],
    ['select=limit,id&title=eq.limit', 'select=limit,id&title=eq.limit&limit=1000', 1000],
    ['li%6Dit=7', 'li%6Dit=7', null],
    ['lim%69t=7&select=id', 'lim%69t=7&select=id', null],
    ['name=eq.a%26limit%3D1', 'name=eq.a%26limit%3D1&limit=1000', 1000],
  ]
  for (const [query, forwarded, added] of cases) {
    const r = rewriteQuery(query, open)
    t.equal(r.query, forwarded, `"${query}" -> "${forwarded}"`)
    t.equal(r.limitAdded, added, `"${query}": limit added ${String(added)}`)
    t.equal(r.limitCapped, null)
    t.equal(r.apikey, undefined)
  }
})

t.test('with a cap: larger limits are capped, smaller ones kept', async (t) => {
  const cases: Array<[string, string, number | null, number | null]> = [
    ['', 'limit=50', 50, null],
    ['limit=20', 'limit=20', null, null],
    ['limit=1000&select=id', 'limit=200&select=id', null, 200],
    ['authors.limit=2', 'authors.limit=2&limit=50', 50, null],
    ['authors.limit=900&limit=10', 'authors.limit=900&limit=10', null, null],
  ]
  for (const [query, forwarded, added, cap] of cases) {
    const r = rewriteQuery(query, capped)
    t.equal(r.query, forwarded, `"${query}" -> "${forwarded}"`)
    t.equal(r.limitAdded, added)
    t.equal(r.limitCapped, cap)
  }
})

t.test('apikey is taken out wherever it is, and only limits of table reads are touched', async (t) => {
  let r = rewriteQuery('select=id&apikey=pk_1&limit=5', open)
  t.same(r, { query: 'select=id&limit=5', apikey: 'pk_1', limitAdded: null, limitCapped: null })
  r = rewriteQuery('apikey=pk%5F1', open)
  t.same(r, { query: 'limit=1000', apikey: 'pk_1', limitAdded: 1000, limitCapped: null })
  r = rewriteQuery('apikey=a&apikey=b&x=1', null)
  t.same(
    r,
    { query: 'x=1', apikey: 'a', limitAdded: null, limitCapped: null },
    'the first apikey counts; not a table read: no limit',
  )
  r = rewriteQuery('limit=5000', null)
  t.same(r, { query: 'limit=5000', apikey: undefined, limitAdded: null, limitCapped: null }, 'RPC or write: untouched')
})
