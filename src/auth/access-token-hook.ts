// The custom access token hook (GoTrue's customize-access-token): the claims about to be signed
// go to the hook with the user id and how the token was asked for; the hook answers `{claims}`,
// which are signed instead once they pass GoTrue's minimum schema (MinimumViableTokenSchema of
// supabase/auth internal/tokens/service.go: required claims present and of their types).
import { Ajv, type ErrorObject } from 'ajv'
import { UnexpectedFailureError } from './errors.js'
import { hookOf, runAuthHook, type HookCall } from './auth-hooks.js'

const ajv = new Ajv({ allErrors: true, strict: false })

const MINIMUM_TOKEN_SCHEMA = {
  type: 'object',
  properties: {
    aud: { type: ['string', 'array'] },
    exp: { type: 'integer' },
    jti: { type: 'string' },
    iat: { type: 'integer' },
    iss: { type: 'string' },
    nbf: { type: 'integer' },
    sub: { type: 'string' },
    email: { type: 'string' },
    phone: { type: 'string' },
    app_metadata: { type: 'object' },
    user_metadata: { type: 'object' },
    role: { type: 'string' },
    aal: { type: 'string' },
    amr: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'object' }] } },
    session_id: { type: 'string' },
    client_id: { type: 'string' },
  },
  required: ['aud', 'exp', 'iat', 'sub', 'email', 'phone', 'role', 'aal', 'session_id', 'is_anonymous'],
} as const

const validate = ajv.compile(MINIMUM_TOKEN_SCHEMA as object)

/** An error in gojsonschema's words (`(root): email is required`, `exp: Invalid type. Expected: integer`). */
function describe(e: ErrorObject): string {
  const field = e.instancePath === '' ? '(root)' : e.instancePath.slice(1).replace(/\//g, '.')
  if (e.keyword === 'required')
    return `${field}: ${String((e.params as { missingProperty: string }).missingProperty)} is required`
  if (e.keyword === 'type')
    return `${field}: Invalid type. Expected: ${String((e.params as { type: string | string[] }).type)}`
  return `${field}: ${e.message ?? 'is invalid'}`
}

/**
 * The claims to sign: the hook's when the database has a custom access token hook, else null
 * (sign `claims` as they are). Throws GoTrue's 500s for a missing or non-conforming answer.
 */
export async function customizeAccessToken(
  call: HookCall,
  userId: string,
  method: string,
  claims: Record<string, unknown>,
): Promise<Record<string, unknown> | null> {
  if (hookOf(call.ctx, 'custom_access_token') === null) return null
  const answer = await runAuthHook(call, 'custom_access_token', {
    user_id: userId,
    claims,
    authentication_method: method,
  })
  if (answer === null || !('claims' in answer))
    throw new UnexpectedFailureError('hook', 'output claims field is missing')
  const out = answer.claims
  if (typeof out !== 'object' || out === null || Array.isArray(out)) {
    throw new UnexpectedFailureError('hook', 'Error unmarshaling JSON output.')
  }
  if (!validate(out)) {
    const lines = (validate.errors ?? []).map((e) => `- ${describe(e)}\n`).join('')
    throw new UnexpectedFailureError('hook', `output claims do not conform to the expected schema: \n${lines}`)
  }
  return out as Record<string, unknown>
}
