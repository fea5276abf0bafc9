// Types shared by the auth engine's modules: the per-request tenant context, the rows
// of the GoTrue tables we read, and the wire shapes we send. Importing a type from here
// never drags in logic.
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config/index.js'
import type { Tenant } from '../tenants/index.js'
import type { Mailer } from './mail/index.js'
import type { RateLimits } from './rate-limits.js'
import type { PoolLike } from '../shared/index.js'

/** Everything a handler needs about the tenant it serves. Built once per request. */
export interface TenantContext {
  readonly tenant: Tenant
  /** Pool of the tenant's `_authn` login (owner of schema auth). */
  readonly db: PoolLike
  /** `iss` of this tenant's tokens. */
  readonly issuer: string
  /** Public base of this tenant's auth API: `{public_url}/{database}/auth/v1`. */
  readonly externalUrl: string
  readonly config: Config
  readonly mailer: Mailer
  /** The per-IP request buckets of this engine (shared through Redis when configured). */
  readonly rateLimits: RateLimits
  readonly log: FastifyBaseLogger
  now(): Date
}

/** A row of auth.users as the models return it. */
export interface UserRow {
  id: string
  aud: string | null
  role: string | null
  email: string | null
  encrypted_password: string | null
  email_confirmed_at: Date | null
  invited_at: Date | null
  confirmation_token: string | null
  confirmation_sent_at: Date | null
  recovery_token: string | null
  recovery_sent_at: Date | null
  email_change_token_new: string | null
  email_change: string | null
  email_change_sent_at: Date | null
  email_change_token_current: string | null
  email_change_confirm_status: number | null
  last_sign_in_at: Date | null
  raw_app_meta_data: Record<string, unknown> | null
  raw_user_meta_data: Record<string, unknown> | null
  created_at: Date | null
  updated_at: Date | null
  phone: string | null
  phone_confirmed_at: Date | null
  phone_change: string | null
  phone_change_sent_at: Date | null
  confirmed_at: Date | null
  banned_until: Date | null
  reauthentication_sent_at: Date | null
  is_sso_user: boolean
  deleted_at: Date | null
  is_anonymous: boolean
}

export interface IdentityRow {
  id: string
  provider_id: string
  user_id: string
  identity_data: Record<string, unknown>
  provider: string
  last_sign_in_at: Date | null
  created_at: Date | null
  updated_at: Date | null
  email: string | null
}

export interface SessionRow {
  id: string
  user_id: string
  created_at: Date | null
  updated_at: Date | null
  aal: string | null
  not_after: Date | null
  refreshed_at: Date | null
  user_agent: string | null
  ip: string | null
}

/** A row of auth.mfa_factors (the secret stays server-side). */
export interface FactorRow {
  id: string
  user_id: string
  friendly_name: string | null
  factor_type: 'totp' | 'webauthn' | 'phone'
  status: 'verified' | 'unverified'
  created_at: Date
  updated_at: Date
  secret: string | null
  phone: string | null
  last_challenged_at: Date | null
  web_authn_aaguid: string | null
  last_webauthn_challenge_data: unknown
}

/** A user with its identities (and factors, when loaded): what the user JSON is built from. */
export interface UserWithIdentities {
  user: UserRow
  identities: IdentityRow[]
  /** MFA factors; `factors` appears in the user JSON when non-empty. */
  factors?: FactorRow[]
}

export interface AmrEntry {
  method: string
  timestamp: number
  provider?: string
}

/** The User object of docs/auth-protocol.md §2.1 (optional timestamps omitted when null). */
export interface UserJson {
  id: string
  aud: string
  role: string
  email: string
  phone: string
  app_metadata: Record<string, unknown>
  user_metadata: Record<string, unknown>
  identities: Array<Record<string, unknown>>
  is_anonymous: boolean
  [field: string]: unknown
}

/** The AccessTokenResponse of docs/auth-protocol.md §2.4. */
export interface AccessTokenResponse {
  access_token: string
  token_type: 'bearer'
  expires_in: number
  expires_at: number
  refresh_token: string
  user: UserJson
  provider_token?: string
  provider_refresh_token?: string
  weak_password?: { message: string; reasons: string[] }
}

/** The verified claims of a bearer token on a user route. */
export interface BearerClaims {
  sub?: string
  aud?: string | string[]
  role?: string
  session_id?: string
  email?: string
  is_anonymous?: boolean
  amr?: AmrEntry[]
  [k: string]: unknown
}

/** What the `user` check (bearer.ts requireUser) proves about the caller. */
export interface AuthenticatedUser {
  claims: BearerClaims
  user: UserWithIdentities
  /** Null when the token names no session (then /logout falls back to global). */
  sessionId: string | null
}
