// docs/errors.md is the error reference, rendered from the parts' registries by
// scripts/errors-doc.ts: this test renders it again and fails when the file differs (a code
// added, changed or retired without `npm run errors-doc`). It also fails when an errors
// module exports an error class its part's registry leaves out, so nothing escapes the docs.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { renderErrorsDoc, ERRORS_DOC } from '../../scripts/errors-doc.js'
import { SHARED_ERRORS, isDefinedError, type ErrorRegistry } from '../../src/shared/index.js'
import { GATEWAY_ERRORS, GATEWAY_ERROR_CODES, REFUSAL_ERRORS, REFUSAL_CODES } from '../../src/gateway/index.js'
import { REST_ERRORS } from '../../src/rest/index.js'
import { AUTH_ERRORS, AUTH_ERROR_CODES } from '../../src/auth/index.js'
import { PANEL_ERRORS, PANEL_ERROR_CODES } from '../../src/panel/index.js'
import { TENANT_ERRORS } from '../../src/tenants/index.js'
import { PLATFORM_ERRORS } from '../../src/platform/index.js'
import * as sharedModule from '../../src/shared/errors.js'
import * as gatewayModule from '../../src/gateway/index.js'
import * as restModule from '../../src/rest/index.js'
import * as authModule from '../../src/auth/index.js'
import * as panelModule from '../../src/panel/index.js'
import * as tenantsModule from '../../src/tenants/index.js'
import * as platformModule from '../../src/platform/index.js'
import * as typegenModule from '../../src/typegen/index.js'

t.test('docs/errors.md is what the registries render', async (t) => {
  t.equal(readFileSync(ERRORS_DOC, 'utf8'), renderErrorsDoc(), 'in sync (else run npm run errors-doc)')
})

t.test('the script checks the file the same way', async (t) => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/errors-doc.ts', '--check'], { encoding: 'utf8' })
  t.equal(r.status, 0, r.stderr || 'in sync')
})

t.test('a registry changed without regenerating is caught', async (t) => {
  const doc = readFileSync(ERRORS_DOC, 'utf8')
  const reg = GATEWAY_ERRORS as unknown as Record<string, unknown>
  const { NotReadyError } = GATEWAY_ERRORS
  reg.NotReadyError = sharedModule.defineError('not_ready_any_more', 503, () => 'unexpected failure')
  try {
    t.not(renderErrorsDoc(), doc, 'a new code changes the rendered document')
  } finally {
    reg.NotReadyError = NotReadyError
  }
  t.equal(renderErrorsDoc(), doc)
})

t.test("every error class an errors module exports is in its part's registry", async (t) => {
  const pairs: Array<[string, object, ErrorRegistry[]]> = [
    ['shared', sharedModule, [SHARED_ERRORS]],
    ['gateway', gatewayModule, [GATEWAY_ERRORS, REFUSAL_ERRORS]],
    ['rest', restModule, [REST_ERRORS]],
    ['auth', authModule, [AUTH_ERRORS]],
    ['panel', panelModule, [PANEL_ERRORS]],
    ['tenants', tenantsModule, [TENANT_ERRORS]],
    ['platform', platformModule, [PLATFORM_ERRORS]],
    ['typegen', typegenModule, [typegenModule.TYPEGEN_ERRORS]],
  ]
  for (const [part, mod, registries] of pairs) {
    const listed = new Set(registries.flatMap((r) => Object.values(r)))
    for (const [name, value] of Object.entries(mod)) {
      if (
        typeof value !== 'function' ||
        typeof (value as { code?: unknown }).code !== 'string' ||
        typeof (value as { template?: unknown }).template !== 'function'
      )
        continue
      t.ok(listed.has(value as never), `${part}: ${name} is in the registry`)
    }
  }
})

t.test('the code lists are derived from the registries', async (t) => {
  t.same(GATEWAY_ERROR_CODES, [...new Set(Object.values(GATEWAY_ERRORS).map((c) => c.code))].sort())
  t.same(REFUSAL_CODES, ['no_table_grant', 'permission_denied', 'rls_refusal', 'unknown_table'])
  t.same(PANEL_ERROR_CODES, [...new Set(Object.values(PANEL_ERRORS).map((c) => c.code))].sort())
  t.ok(AUTH_ERROR_CODES.includes('tenant_not_found'), 'the auth engine answers the shared tenant_not_found')
  t.equal(AUTH_ERRORS.TenantNotFoundError, SHARED_ERRORS.TenantNotFoundError, 'one definition, imported')
  t.equal(GATEWAY_ERRORS.TenantNotFoundError, SHARED_ERRORS.TenantNotFoundError)
  t.equal(REST_ERRORS.TenantNotFoundError, SHARED_ERRORS.TenantNotFoundError)
  t.ok(isDefinedError(new AUTH_ERRORS.SignupDisabledError()))
})

t.test('each registry has one class per code (a code said in several ways is one class with cases)', async (t) => {
  const registries: Array<[string, ErrorRegistry]> = [
    ['shared', SHARED_ERRORS],
    ['gateway', GATEWAY_ERRORS],
    ['refusals', REFUSAL_ERRORS],
    ['rest', REST_ERRORS],
    ['auth', AUTH_ERRORS],
    ['panel', PANEL_ERRORS],
    ['tenants', TENANT_ERRORS],
    ['platform', PLATFORM_ERRORS],
    ['typegen', typegenModule.TYPEGEN_ERRORS],
  ]
  for (const [part, registry] of registries) {
    const byCode = new Map<string, Set<unknown>>()
    for (const cls of Object.values(registry)) {
      const set = byCode.get(cls.code) ?? new Set()
      set.add(cls)
      byCode.set(cls.code, set)
    }
    const several = [...byCode].filter(([, classes]) => classes.size > 1).map(([code]) => code)
    t.same(several, [], `${part}: codes with more than one class`)
  }
})

t.test('a class with cases answers each case with its status and message', async (t) => {
  const { UserNotFoundError, OverEmailSendRateLimitError } = AUTH_ERRORS
  const bearer = new UserNotFoundError('bearer')
  t.match(bearer, { code: 'user_not_found', status: 403, message: 'User from sub claim in JWT does not exist' })
  t.match(new UserNotFoundError('byId'), { code: 'user_not_found', status: 404, message: 'User not found' })
  const wait = new OverEmailSendRateLimitError('wait', 42, { headers: { 'retry-after': '42' } })
  t.match(wait, { status: 429, message: 'For security purposes, you can only request this after 42 seconds.' })
  t.same(wait.headers, { 'retry-after': '42' }, 'the options follow the case arguments')
  t.throws(() => new (UserNotFoundError as unknown as new (w: string) => Error)('toString'), TypeError)
  t.ok(isDefinedError(bearer), 'a registry class')
})

t.test('a fixed message is written as it is said; options are then the first argument', async (t) => {
  const { defineError, defineErrorCases } = sharedModule
  const Fixed = defineError('fixed_case', 409, 'It is fixed')
  const fixed = new Fixed({ hint: 'a hint', headers: { 'retry-after': '1' } })
  t.match(fixed, { code: 'fixed_case', status: 409, message: 'It is fixed', hint: 'a hint' })
  t.same(fixed.headers, { 'retry-after': '1' })
  const WithDetails = defineError('fixed_details', 400, { message: 'Bad', details: 'always these' })
  t.match(new WithDetails(), { message: 'Bad', details: 'always these', hint: null })
  t.match(new WithDetails({ details: 'where raised' }), { details: 'where raised' }, 'options given where raised win')
  const Cased = defineErrorCases('cased_fixed', { plain: [400, 'Plain'], full: [401, { message: 'Full', hint: 'h' }] })
  t.match(new Cased('plain'), { status: 400, message: 'Plain' })
  t.match(new Cased('full', { details: 'd' }), { status: 401, message: 'Full', hint: 'h', details: 'd' })
})
