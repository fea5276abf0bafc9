// One caller, one name: a secret-key call is "service_role" (its token's role claim) in the
// gateway's refusals, in the panel's test-query refusals and in the engines' messages,
// as anon and authenticated callers are named by their claims too.
import t from 'tap'
import { startStack, gatewayCall, type Stack, type StackTenant } from '../helpers/panel-stack.js'

let stack: Stack
let x: StackTenant

t.before(async () => {
  stack = await startStack(t)
  x = await stack.addTenant({ organization: 'org_names' })
  await stack.owner(x, 'CREATE TABLE public.vault (id int PRIMARY KEY)')
  await stack.owner(x, `REVOKE ALL ON public.vault FROM "${x.roles.svc}"`)
})

t.test("the secret key's caller is service_role at the gateway and in the panel", async (t) => {
  const r = await gatewayCall(stack, x, '/rest/v1/vault?select=id', { key: 'secret' })
  t.equal(r.status, 404, JSON.stringify(r.body))
  t.equal(r.body.code, 'unknown_table')
  t.equal(r.body.role, 'service_role')
  t.match(r.body.message, `role service_role (${x.roles.svc})`)

  const token = await stack.panelSession({ userId: 'p1', orgs: ['org_names'] })
  for (const as of ['service_role', 'svc']) {
    const q = await stack.panel('POST', `/organizations/org_names/databases/${x.database}/api/test-query`, {
      token,
      body: { sql: 'SELECT id FROM public.vault', as },
    })
    t.equal(q.body.code, r.body.code, `panel as ${as}: the same refusal`)
    t.equal(q.body.role, 'service_role', `panel as ${as}: the same name`)
    t.equal(q.body.message, r.body.message, `panel as ${as}: the same message`)
  }
})
