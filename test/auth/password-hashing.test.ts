// Passwords are hashed natively off the event loop (@node-rs/bcrypt) as GoTrue writes them
// ($2a$, the configured cost), and hashes written before (bcryptjs' $2b$, GoTrue's $2a$)
// still sign in. The event-loop stall of a sign-in is measured by bench/auth-flood.ts.
import t from 'tap'
import { adminQuery } from '../helpers/db.js'
import { call, email, startAuth } from '../helpers/auth-harness.js'

// Written by bcryptjs (the engine's earlier hasher) for 'hunter2-pw', cost 4; the same
// hash with GoTrue's $2a$ prefix (identical bytes for passwords under 255 bytes).
const BCRYPTJS_2B = '$2b$04$hUoa3RWfMSb9fA1CuRIGVeIigdEI1xVtkwrTZXfezUZ5biCjJNLTS'
const GOTRUE_2A = '$2a$' + BCRYPTJS_2B.slice(4)

t.test('earlier hashes verify, new ones are $2a$ at the configured cost', async (t) => {
  const h = await startAuth(t, { bcryptCost: 5 })
  const x = h.list[0]!
  const svc = await h.serviceToken(x)
  for (const [name, hash] of [
    ['bcryptjs $2b$', BCRYPTJS_2B],
    ['GoTrue $2a$', GOTRUE_2A],
  ] as const) {
    const who = email('legacy')
    const made = await call(`${h.base(x)}/admin/users`, {
      body: { email: who, password_hash: hash, email_confirm: true },
      token: svc,
    })
    t.equal(made.status, 200, `${name}: user created with the hash`)
    t.equal(
      (await call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'hunter2-pw' } })).status,
      200,
      `${name}: the right password signs in`,
    )
    const wrong = await call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'hunter3-pw' } })
    t.equal(wrong.status, 400, `${name}: a wrong one does not`)
    t.equal(wrong.body.code, 'invalid_credentials')
  }

  const who = email('fresh')
  t.equal((await call(`${h.base(x)}/signup`, { body: { email: who, password: 'password-123' } })).status, 200)
  const row = await adminQuery<{ encrypted_password: string }>(
    'SELECT encrypted_password FROM auth.users WHERE email = $1',
    [who],
    x.database,
  )
  t.match(row.rows[0]!.encrypted_password, /^\$2a\$05\$[./A-Za-z0-9]{53}$/, 'stored as GoTrue writes it')
  t.equal(
    (await call(`${h.base(x)}/token?grant_type=password`, { body: { email: who, password: 'password-123' } })).status,
    200,
  )
  t.equal(
    (
      await call(`${h.base(x)}/token?grant_type=password`, {
        body: { email: email('nobody'), password: 'password-123' },
      })
    ).status,
    400,
    'an unknown address is compared against a dummy hash and refused',
  )
})
