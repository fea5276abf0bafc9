// The per-database auth switches the panel shows and changes (docs/service.md §1: magic link, PKCE,
// external providers with client id and secret, site URL, redirect allow list, mail
// confirmation): the masked view (secrets never leave), and a validated merge of a PATCH
// into the tenant's settings (the tenant record schema of src/tenants decides validity).
import { Ajv, type ErrorObject } from 'ajv'
import {
  AuthHooksSchema,
  AuthSettingsSchema,
  DEFAULT_RATE_LIMITS,
  type AuthHook,
  type AuthHooks,
  type AuthSettings,
  type ProviderSettings,
  type RateLimits,
  type WebAuthnSettings,
  type OAuthServerSettings,
  oauthServerOf,
  maskRecordPart,
} from '../tenants/index.js'
import { ValidationError } from './errors.js'
import {
  isPlainObject,
  ownValue,
  checkOutboundUrl,
  OutboundRefusedError,
  readableSchemaErrors,
  type OutboundPolicy,
} from '../shared/index.js'

/** What a masked secret looks like; sent back unchanged in a PATCH it keeps the stored one. */
export const MASKED_SECRET = '********'

/** Fields a PATCH may change. */
const PATCHABLE = [
  'site_url',
  'redirect_urls',
  'magic_link',
  'pkce',
  'mail_confirmation',
  'providers',
  'anonymous_sign_in',
  'anonymous_rate_per_hour',
  'mfa_totp_enroll',
  'mfa_totp_verify',
  'mfa_max_enrolled_factors',
  'mfa_rate_per_minute',
  'manual_linking',
  'secure_password_change',
  'mail_rate_per_hour',
  'rate_limits',
  'hooks',
  'signup_enabled',
  'password_min_length',
  'password_required_characters',
  'refresh_token_reuse_interval',
  'refresh_token_algorithm_version',
  'otp_expiry',
  'mail_min_interval',
  'passkeys',
  'max_passkeys_per_user',
  'webauthn',
  'mfa_webauthn_enroll',
  'mfa_webauthn_verify',
  'oauth_server',
] as const

interface MaskedProvider {
  client_id: string
  secret: typeof MASKED_SECRET
  enabled: boolean
  issuer?: string
  authorize_url?: string
  token_url?: string
  userinfo_url?: string
  scopes?: string[]
}

export interface AuthSettingsView {
  site_url: string
  redirect_urls: string[]
  magic_link: boolean
  pkce: boolean
  mail_confirmation: boolean
  signup_enabled: boolean
  anonymous_sign_in: boolean
  anonymous_rate_per_hour: number
  mfa_totp_enroll: boolean
  mfa_totp_verify: boolean
  mfa_max_enrolled_factors: number
  mfa_rate_per_minute: number
  manual_linking: boolean
  secure_password_change: boolean
  /** Mails per hour for the database (GoTrue RATE_LIMIT_EMAIL_SENT). */
  mail_rate_per_hour: number
  /** The per-IP request buckets, every one with its effective capacity, rate and interval. */
  rate_limits: RateLimits
  providers: Record<string, MaskedProvider>
  /** Auth hooks by name: `uri`, `enabled`, webhook secrets masked. */
  hooks: Record<string, AuthHook>
  password_min_length: number
  password_required_characters: string
  refresh_token_reuse_interval: number
  /** 1: a row per refresh token; 2: GoTrue's HMAC-signed tokens with a counter in the session. */
  refresh_token_algorithm_version: 1 | 2
  otp_expiry: number
  mail_min_interval: number
  passkeys: boolean
  max_passkeys_per_user: number
  mfa_webauthn_enroll: boolean
  mfa_webauthn_verify: boolean
  /** The WebAuthn relying party of passkeys, or null while none is set. */
  webauthn: WebAuthnSettings | null
  /** The OAuth 2.1 server: enabled, authorization_url_path, allow_dynamic_registration. */
  oauth_server: OAuthServerSettings
}

const HOOK_NAMES = Object.keys(AuthHooksSchema.properties)

/** The hooks set (secrets already masked), by name. */
function hooksView(hooks: AuthHooks | undefined): Record<string, AuthHook> {
  const out: Record<string, AuthHook> = {}
  for (const name of HOOK_NAMES) {
    const h = ownValue(hooks ?? {}, name) as AuthHook | undefined
    if (h !== undefined) out[name] = h
  }
  return out
}

/**
 * Hooks merge by name: null removes one, an object sets it; secrets left out or masked keep the
 * stored ones. Problems are added to `problems`.
 */
function mergeHooks(current: AuthHooks | undefined, patch: unknown, problems: string[]): AuthHooks {
  if (!isPlainObject(patch)) {
    problems.push(
      `hooks: must be an object of hook name (${HOOK_NAMES.join(', ')}) -> {uri, secrets, enabled} (null removes one)`,
    )
    return current ?? {}
  }
  const out: Record<string, unknown> = { ...structuredClone(current ?? {}) }
  for (const [name, value] of Object.entries(patch)) {
    if (!HOOK_NAMES.includes(name)) {
      problems.push(`hooks.${name}: not a hook (${HOOK_NAMES.join(', ')})`)
      continue
    }
    if (value === null) {
      delete out[name]
      continue
    }
    if (!isPlainObject(value)) {
      problems.push(`hooks.${name}: must be an object or null`)
      continue
    }
    const stored = ownValue(out, name) as AuthHook | undefined
    const next: Record<string, unknown> = structuredClone(value)
    const secrets = value.secrets
    if (
      secrets === undefined ||
      (Array.isArray(secrets) && secrets.length > 0 && secrets.every((x) => x === MASKED_SECRET))
    ) {
      if (stored?.secrets !== undefined) next.secrets = stored.secrets
      else delete next.secrets
    }
    out[name] = next
  }
  return out as AuthHooks
}

/** The tenant's buckets over GoTrue's defaults (records stored before rate limits have none). */
function effectiveRateLimits(own: RateLimits | undefined): RateLimits {
  const out = structuredClone(DEFAULT_RATE_LIMITS) as unknown as RateLimits
  for (const name of Object.keys(out) as Array<keyof RateLimits>) {
    const set = own && Object.hasOwn(own, name) ? own[name] : undefined
    if (set) out[name] = { ...out[name], ...structuredClone(set) }
  }
  return out
}

/** The settings as the panel shows them: every field the record's schema declares secret masked. */
export function maskAuthSettings(settings: AuthSettings): AuthSettingsView {
  const a = maskRecordPart(settings, ['auth'], MASKED_SECRET)
  const providers: Record<string, MaskedProvider> = {}
  for (const [name, p] of Object.entries(a.providers ?? {}))
    providers[name] = { ...p, secret: MASKED_SECRET, enabled: p.enabled !== false }
  return {
    site_url: a.site_url,
    redirect_urls: [...a.redirect_urls],
    magic_link: a.magic_link,
    pkce: a.pkce,
    mail_confirmation: a.mail_confirmation,
    signup_enabled: a.signup_enabled,
    anonymous_sign_in: a.anonymous_sign_in,
    anonymous_rate_per_hour: a.anonymous_rate_per_hour,
    mfa_totp_enroll: a.mfa_totp_enroll,
    mfa_totp_verify: a.mfa_totp_verify,
    mfa_max_enrolled_factors: a.mfa_max_enrolled_factors,
    mfa_rate_per_minute: a.mfa_rate_per_minute,
    manual_linking: a.manual_linking,
    secure_password_change: a.secure_password_change,
    mail_rate_per_hour: a.mail_rate_per_hour,
    rate_limits: effectiveRateLimits(a.rate_limits),
    providers,
    hooks: hooksView(a.hooks),
    password_min_length: a.password_min_length,
    password_required_characters: a.password_required_characters,
    refresh_token_reuse_interval: a.refresh_token_reuse_interval,
    refresh_token_algorithm_version: a.refresh_token_algorithm_version,
    otp_expiry: a.otp_expiry,
    mail_min_interval: a.mail_min_interval,
    passkeys: a.passkeys,
    max_passkeys_per_user: a.max_passkeys_per_user,
    mfa_webauthn_enroll: a.mfa_webauthn_enroll,
    mfa_webauthn_verify: a.mfa_webauthn_verify,
    webauthn: a.webauthn === undefined ? null : structuredClone(a.webauthn),
    oauth_server: oauthServerOf(a),
  }
}

const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false })
const validateSettings = ajv.compile(AuthSettingsSchema)

function describe(e: ErrorObject): string {
  const field = (e.instancePath || '').replace(/^\//, '').replace(/\//g, '.')
  if (e.keyword === 'additionalProperties') {
    return `${field ? field + '.' : ''}${String((e.params as { additionalProperty: string }).additionalProperty)}: unknown field`
  }
  if (e.keyword === 'required') {
    return `${field ? field + '.' : ''}${String((e.params as { missingProperty: string }).missingProperty)}: is required`
  }
  return `${field || '(body)'}: ${e.message ?? 'is invalid'}`
}

const PROVIDER_NAME = /^[a-z][a-z0-9_-]{0,63}$/
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\/\S+$/i

/**
 * Merges a PATCH body into `current`. Providers merge by name: `null` removes one, an object
 * updates it (a missing or masked secret keeps the stored one). Throws ValidationError (400)
 * naming every bad field; returns a new object.
 */
export function applyAuthSettingsPatch(current: AuthSettings, patch: unknown): AuthSettings {
  if (!isPlainObject(patch)) throw new ValidationError('send a JSON object of settings to change')
  checkPatchKeys(patch)
  const problems: string[] = []

  const next = structuredClone(current) as AuthSettings & Record<string, unknown>
  for (const k of PATCHABLE) {
    if (!(k in patch) || k === 'providers' || k === 'rate_limits' || k === 'hooks') continue
    next[k] = structuredClone(patch[k]) as never
  }
  // The OAuth server's fields merge one by one: {oauth_server: {enabled: true}} keeps the path.
  if (isPlainObject(patch.oauth_server))
    next.oauth_server = { ...oauthServerOf(current), ...structuredClone(patch.oauth_server) }
  // null takes the relying party away (passkeys must be off then).
  if (patch.webauthn === null) delete next.webauthn
  if ('providers' in patch) {
    const providers = mergeProviders(current.providers, patch.providers, problems)
    if (providers !== undefined) next.providers = providers
  }
  if ('hooks' in patch) next.hooks = mergeHooks(current.hooks, patch.hooks, problems)
  if ('rate_limits' in patch) {
    const limits = mergeRateLimits(current.rate_limits, patch.rate_limits, problems)
    if (limits !== undefined) next.rate_limits = limits
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '))
  return validated(next)
}

/** The patch's keys, each one the panel changes, at least one; throws ValidationError naming the others. */
function checkPatchKeys(patch: Record<string, unknown>): void {
  const problems: string[] = []
  for (const k of Object.keys(patch)) {
    if (!(PATCHABLE as readonly string[]).includes(k))
      problems.push(`${k}: not a setting the panel changes (allowed: ${PATCHABLE.join(', ')})`)
  }
  if (Object.keys(patch).length === 0) problems.push('(body): name at least one setting to change')
  if (problems.length > 0) throw new ValidationError(problems.join('; '))
}

/** Providers merged by name: `null` removes one, an object updates it (a missing or masked secret keeps the stored one). */
function mergeProviders(
  current: AuthSettings['providers'],
  p: unknown,
  problems: string[],
): Record<string, ProviderSettings> | undefined {
  if (!isPlainObject(p)) {
    problems.push('providers: must be an object of provider name -> settings (null removes one)')
    return undefined
  }
  const providers: Record<string, ProviderSettings> = { ...structuredClone(current ?? {}) }
  for (const [name, value] of Object.entries(p)) {
    if (!PROVIDER_NAME.test(name)) {
      problems.push(`providers.${JSON.stringify(name)}: a provider name is lower-case letters, digits, _ and -`)
      continue
    }
    if (value === null) {
      delete providers[name]
      continue
    }
    if (!isPlainObject(value)) {
      problems.push(`providers.${name}: must be an object or null`)
      continue
    }
    providers[name] = mergeProvider(name, ownValue(providers, name), value, problems)
  }
  return providers
}

function mergeProvider(
  name: string,
  stored: ProviderSettings | undefined,
  value: Record<string, unknown>,
  problems: string[],
): ProviderSettings {
  const merged: Record<string, unknown> = { ...(stored ?? {}), ...structuredClone(value) }
  if (value.secret === undefined || value.secret === MASKED_SECRET) {
    const kept = stored?.secret
    if (kept !== undefined) merged.secret = kept
    else if (value.secret === MASKED_SECRET) problems.push(`providers.${name}.secret: is required for a new provider`)
    else delete merged.secret
  }
  return merged as ProviderSettings
}

/**
 * Buckets merge by name and field: {verify: {capacity: 10}} changes one number; null puts a
 * bucket back to GoTrue's default.
 */
function mergeRateLimits(current: AuthSettings['rate_limits'], p: unknown, problems: string[]): RateLimits | undefined {
  if (!isPlainObject(p)) {
    problems.push(
      'rate_limits: must be an object of bucket name -> {capacity, rate, interval_seconds} (null resets one)',
    )
    return undefined
  }
  const merged: Record<string, unknown> = { ...effectiveRateLimits(current) }
  for (const [name, value] of Object.entries(p)) {
    if (value === null) {
      if (Object.hasOwn(DEFAULT_RATE_LIMITS, name))
        merged[name] = { ...DEFAULT_RATE_LIMITS[name as keyof typeof DEFAULT_RATE_LIMITS] }
      continue
    }
    if (!isPlainObject(value)) {
      problems.push(`rate_limits.${name}: must be an object or null`)
      continue
    }
    const stored = Object.hasOwn(merged, name) ? (merged[name] as Record<string, unknown>) : {}
    merged[name] = { ...stored, ...structuredClone(value) }
  }
  return merged as RateLimits
}

/** The merged settings when the schema and the URL checks accept them; else ValidationError. */
function validated(next: AuthSettings): AuthSettings {
  if (!validateSettings(next)) {
    throw new ValidationError(
      readableSchemaErrors(validateSettings.errors ?? [])
        .map(describe)
        .join('; '),
    )
  }
  const problems: string[] = []
  if (!URL_LIKE.test(next.site_url)) problems.push('site_url: must be an absolute URL (https://app.example.com)')
  next.redirect_urls.forEach((u, i) => {
    if (!URL_LIKE.test(u) || u.length > 2048)
      problems.push(`redirect_urls.${i}: must be an absolute URL or URL pattern`)
  })
  for (const k of ['passkeys', 'mfa_webauthn_enroll', 'mfa_webauthn_verify'] as const) {
    if (next[k] && next.webauthn === undefined)
      problems.push(`${k}: needs webauthn (rp_id, rp_display_name, rp_origins)`)
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '))
  return next
}

/** The provider fields our processes fetch (the authorization URL is only a browser redirect). */
const FETCHED_FIELDS = ['issuer', 'token_url', 'userinfo_url'] as const

/**
 * Checks the URLs a PATCH sets for providers against the outbound policy (https, public
 * addresses unless the host is allowed), resolving each host now; throws ValidationError
 * (400) naming every refused field. The engine checks again at each request.
 */
export async function checkProviderUrls(patch: unknown, next: AuthSettings, policy: OutboundPolicy): Promise<void> {
  if (!isPlainObject(patch)) return
  const problems: string[] = []
  /** Checks one URL; a refusal becomes a problem of `field`. */
  const check = async (url: string, field: string): Promise<void> => {
    try {
      await checkOutboundUrl(url, policy)
    } catch (err) {
      if (!(err instanceof OutboundRefusedError)) throw err
      problems.push(`${field}: ${err.reason}`)
    }
  }
  // An HTTP hook is called by the auth engine: the same outbound rules as a provider's URLs.
  for (const name of Object.keys(isPlainObject(patch.hooks) ? patch.hooks : {})) {
    const uri = (ownValue(next.hooks ?? {}, name) as AuthHook | undefined)?.uri
    if (uri !== undefined && !uri.startsWith('pg-functions:')) await check(uri, `hooks.${name}.uri`)
  }
  for (const [name, value] of Object.entries(isPlainObject(patch.providers) ? patch.providers : {})) {
    const p = ownValue(next.providers, name)
    if (!isPlainObject(value) || p === undefined) continue
    for (const field of FETCHED_FIELDS) {
      const url = p[field]
      if (value[field] !== undefined && typeof url === 'string' && url !== '')
        await check(url, `providers.${name}.${field}`)
    }
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '))
}
