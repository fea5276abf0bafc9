// JSON nested deeper than auth.max_json_depth is a 400 bad_json naming the limit, in the
// auth engine's own parser (so direct engine calls are covered, not only the gateway's):
// sign-up user_metadata fifty thousand levels deep, PUT /user data, a lowered limit. Also isoString (json.ts).
import t from 'tap'
import { call, email, startAuth } from '../helpers/auth-harness.js'
import { isoString } from '../../src/auth/json.js'

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

t.test('isoString: what toISOString writes, for any time, remembered or not', async (t) => {
  const times = [0, -1, 1, 1_764_227_572_123, -62_135_596_800_000, 253_402_300_799_999, 8.64e15, -8.64e15]
  for (let i = 0; i < 12_000; i++) times.push(Math.floor((Math.random() - 0.5) * 2 * 8.64e15))
  let wrong = 0
  for (let round = 0; round < 2; round++) {
    for (const ms of times) if (isoString(new Date(ms)) !== new Date(ms).toISOString()) wrong++
  }
  t.equal(wrong, 0, 'every time, the first time and again (past the 10,000 remembered)')
  t.throws(() => isoString(new Date(Number.NaN)), RangeError, 'an invalid date throws as toISOString does')
  t.throws(() => isoString(new Date(Number.NaN)), RangeError, 'and again')
})
