// JSON nested deeper than auth.max_json_depth is a 400 bad_json naming the limit, in the
// auth engine's own parser (so direct engine calls are covered, not only the gateway's):
// sign-up user_metadata fifty thousand levels deep, PUT /user data, a lowered limit.
import t from 'tap'
import { call, email, startAuth } from '../helpers/auth-harness.js'

/** `levels` nested objects: {"a":{"a":...{}}}. */
function nest(levels: number): Record<string, unknown> {
  let v: Record<string, unknown> = {}
  for (let i = 1; i < levels; i++) v = { a: v }
  return v
}
/** The same as raw text (JSON.stringify recurses and cannot make 50,000 levels). */
const nestText = (levels: number) => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1)

t.test('the default limit (100 levels, as the REST engine)', async (t) => {
  const h = await startAuth(t)
  const x = h.list[0]!
  const deep = await fetch(`${h.base(x)}/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-supabase-api-version': '2024-01-01' },
    body: `{"email":"${email('deep')}","password":"password-123","data":${nestText(50_000)}}`,
  })
  t.equal(deep.status, 400)
  const body = (await deep.json()) as { code: string; message: string }
  t.equal(body.code, 'bad_json')
  t.match(body.message, /deeper than 100 levels/, 'the message names the limit')
  t.match(body.message, /auth\.max_json_depth/, 'and the setting')

  const who = email('meta')
  const up = await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123', data: nest(60) } })
  t.equal(up.status, 200, 'metadata within the limit is stored')
  const token = up.body.access_token as string
  // The body object is level 1: data of 99 levels makes 100, one more is refused.
  t.equal((await call(`${h.base(x)}/user`, { method: 'PUT', token, body: { data: nest(99) } })).status, 200)
  const over = await call(`${h.base(x)}/user`, { method: 'PUT', token, body: { data: nest(100) } })
  t.equal(over.status, 400)
  t.equal(over.body.code, 'bad_json')
  const brackets = await call(`${h.base(x)}/user`, { method: 'PUT', token, body: { data: { s: '{['.repeat(500) } } })
  t.equal(brackets.status, 200, 'brackets inside strings are not nesting')
  t.equal(brackets.body.user_metadata.s, '{['.repeat(500))
})

t.test('a configured limit', async (t) => {
  const h = await startAuth(t, { auth: { max_json_depth: 8 } })
  const x = h.list[0]!
  const r = await call(`${h.base(x)}/signup`, {
    body: { email: email('cfg'), password: 'password-123', data: nest(8) },
  })
  t.equal(r.status, 400)
  t.match(r.body.message, /deeper than 8 levels/)
  t.equal(
    (await call(`${h.base(x)}/signup`, { body: { email: email('cfg'), password: 'password-123', data: nest(7) } }))
      .status,
    200,
  )
})
