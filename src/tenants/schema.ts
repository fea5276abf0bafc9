// The tenant record: the schema of a tenant file (config/tenants/<database>.yaml),
// its `${ENV}` interpolation, and the runtime form every process uses (keys hashed).
// Validation errors name the file and the field; nothing here does I/O.
import { Type, type Static, type TObject, type TOptional, type TSchema } from '@sinclair/typebox'
import { createHash, timingSafeEqual } from 'node:crypto'
import { Ajv, type ErrorObject } from 'ajv'
import { ConfigError, ROLE_KINDS, readableSchemaErrors } from '../shared/index.js'
import { tenantFileEnvironment } from '../config/index.js'
import { redactFieldsOf, redactSecrets } from './redact.js'
import { escapeSecretFields, expandSecretFields, maskSecretFields, secret } from './secret-fields.js'
import {
  KID,
  currentSigningKey,
  runtimeSigningKey,
  signingKeyProblem,
  withoutRevoked,
  type SigningAlgorithm,
  type TenantSigningKey,
} from './signing-keys.js'

/** The URL segment of a database. Checked before any look-up. */
export const DATABASE_NAME = /^[a-z][a-z0-9_-]{0,62}$/

const Url = Type.String({ minLength: 1, maxLength: 2048 })
/** A connection string: its password is a secret (an operator writes `${ENV}` for it). */
const ConnectionUrl = (env: string) => Type.String({ minLength: 1, maxLength: 2048, ...secret('url', env) })
const RoleName = Type.String({ minLength: 1, maxLength: 63 })

const ProviderSchema = Type.Object(
  {
    client_id: Type.String({ minLength: 1 }),
    secret: Type.String({ minLength: 1, ...secret('value', '{2}_SECRET') }),
    /** OIDC issuer (discovery) for the generic `oidc` preset, or to override a preset. */
    issuer: Type.Optional(Type.String()),
    authorize_url: Type.Optional(Type.String()),
    token_url: Type.Optional(Type.String()),
    userinfo_url: Type.Optional(Type.String()),
    scopes: Type.Optional(Type.Array(Type.String())),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
)

const SmtpSchema = Type.Object(
  {
    host: Type.String({ minLength: 1 }),
    port: Type.Integer({ minimum: 1, maximum: 65535, default: 25 }),
    user: Type.Optional(Type.String()),
    pass: Type.Optional(Type.String(secret('value', 'SMTP_PASS'))),
    secure: Type.Optional(Type.Boolean()),
    sender: Type.String({ default: 'no-reply@gatehouse.local' }),
    sender_name: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)

const MailTemplateSchema = Type.Object(
  {
    subject: Type.Optional(Type.String({ maxLength: 1024 })),
    html: Type.Optional(Type.String({ maxLength: 65536 })),
    text: Type.Optional(Type.String({ maxLength: 65536 })),
  },
  { additionalProperties: false },
)

/**
 * One auth hook (GoTrue's hook configuration): `uri` is `pg-functions://postgres/<schema>/<function>`
 * (a Postgres function the auth engine calls in its own transaction) or `https://...` (a POST
 * signed with Standard Webhooks); `secrets` are the webhook secrets (`v1,whsec_<base64>`).
 */
const AuthHookSchema = Type.Object(
  {
    uri: Type.String({
      pattern: '^(pg-functions://[^/]*/[A-Za-z_][A-Za-z0-9_$]*/[A-Za-z_][A-Za-z0-9_$]*|https?://\\S+)$',
      maxLength: 2048,
    }),
    secrets: Type.Optional(
      Type.Array(Type.String({ pattern: '^v1,whsec_[A-Za-z0-9+/=]+$' }), {
        maxItems: 5,
        ...secret('value', 'HOOK_{2}_SECRET_{4+}'),
      }),
    ),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)

/** An object of the given fields, each optional and each `item`, and nothing else. */
function optionalEach<K extends string, T extends TSchema>(
  names: readonly K[],
  item: T,
): TObject<{ [P in K]: TOptional<T> }> {
  const fields = Object.fromEntries(names.map((n) => [n, Type.Optional(item)])) as unknown as { [P in K]: TOptional<T> }
  return Type.Object(fields, { additionalProperties: false })
}

/** The hooks of a database, by GoTrue's names. */
export const AuthHooksSchema = optionalEach(
  [
    'custom_access_token',
    'send_email',
    'password_verification_attempt',
    'mfa_verification_attempt',
    'before_user_created',
  ],
  AuthHookSchema,
)

/** Per-kind overrides of the auth engine's mails; GoTrue placeholders ({{ .ConfirmationURL }}, {{ .Token }} ...). */
const MailTemplatesSchema = optionalEach(
  ['confirmation', 'invite', 'recovery', 'magic_link', 'email_change', 'reauthentication'],
  MailTemplateSchema,
)

/**
 * GoTrue's per-IP rate limits (RATE_LIMIT_OTP, _TOKEN_REFRESH, _VERIFY): buckets of 30
 * tokens refilled at `rate` per `interval_seconds`. Anonymous sign-ins and MFA have their
 * own flat settings (anonymous_rate_per_hour, mfa_rate_per_minute) as GoTrue does.
 */
/** Requests allowed per second and per minute (either may be absent: no limit on it). */
const RestRateWindowsSchema = Type.Object(
  {
    second: Type.Optional(Type.Integer({ minimum: 1 })),
    minute: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
)

/** rest.rate_limits: what each limit counts by. */
const RestRateLimitsSchema = Type.Object(
  {
    /** All requests to the database together. */
    database: Type.Optional(RestRateWindowsSchema),
    /** Per client address (the socket's, or X-Forwarded-For from gateway.trusted_proxies). */
    client: Type.Optional(RestRateWindowsSchema),
    /** Per API key sent (apikey header or query parameter). */
    key: Type.Optional(RestRateWindowsSchema),
  },
  { additionalProperties: false },
)

export type RestRateLimits = Static<typeof RestRateLimitsSchema>

export const DEFAULT_RATE_LIMITS = {
  /** POST /signup with email or phone; POST /token password, pkce, id_token. */
  sign_in_sign_up: { capacity: 30, rate: 30, interval_seconds: 300 },
  /** POST /token grant_type=refresh_token. */
  token_refresh: { capacity: 30, rate: 150, interval_seconds: 300 },
  /** GET and POST /verify. */
  verify: { capacity: 30, rate: 30, interval_seconds: 300 },
  /** POST /otp, /magiclink, /recover, /resend; PUT /user. */
  otp: { capacity: 30, rate: 30, interval_seconds: 300 },
} as const

export type RateLimitBucketName = keyof typeof DEFAULT_RATE_LIMITS

const rateLimitBucket = (d: { capacity: number; rate: number; interval_seconds: number }) =>
  Type.Object(
    {
      /** Requests a client may make at once (the bucket's size). */
      capacity: Type.Integer({ minimum: 1, default: d.capacity }),
      /** Requests refilled per interval_seconds. */
      rate: Type.Integer({ minimum: 1, default: d.rate }),
      interval_seconds: Type.Integer({ minimum: 1, default: d.interval_seconds }),
    },
    { additionalProperties: false, default: {} },
  )

const RateLimitsSchema = Type.Object(
  {
    sign_in_sign_up: rateLimitBucket(DEFAULT_RATE_LIMITS.sign_in_sign_up),
    token_refresh: rateLimitBucket(DEFAULT_RATE_LIMITS.token_refresh),
    verify: rateLimitBucket(DEFAULT_RATE_LIMITS.verify),
    otp: rateLimitBucket(DEFAULT_RATE_LIMITS.otp),
  },
  { additionalProperties: false, default: {} },
)

const WebAuthnSchema = Type.Object(
  {
    /** The relying party id: the site's registrable domain (`example.com`, `localhost`). */
    rp_id: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9.-]+$' }),
    /** The name authenticators show. */
    rp_display_name: Type.String({ minLength: 1 }),
    /** Origins the browser may run the ceremony on (`https://app.example.com`). */
    rp_origins: Type.Array(Type.String({ pattern: '^https?://[^/\\s]+$' }), { minItems: 1 }),
    /** Seconds a ceremony's challenge stays usable (GoTrue WEBAUTHN_CHALLENGE_EXPIRY_DURATION, 5m). */
    challenge_expiry_seconds: Type.Integer({ minimum: 10, maximum: 3600, default: 300 }),
  },
  { additionalProperties: false },
)

/**
 * GoTrue's OAuth 2.1 server (`[auth.oauth_server]`, GOTRUE_OAUTH_SERVER_*): this database signs
 * in users for third-party apps registered as OAuth clients (docs/auth-protocol.md §3.22).
 */
const OAuthServerSchema = Type.Object(
  {
    enabled: Type.Boolean({ default: false }),
    /** The consent page's path on site_url: /oauth/authorize redirects there with `?authorization_id=`. */
    authorization_url_path: Type.String({
      minLength: 1,
      maxLength: 512,
      pattern: '^/?[^\\s?#]*$',
      default: '/oauth/consent',
    }),
    /** Anyone may register a client at POST /oauth/clients/register (RFC 7591). */
    allow_dynamic_registration: Type.Boolean({ default: false }),
  },
  { additionalProperties: false, default: {} },
)

export const AuthSettingsSchema = Type.Object(
  {
    site_url: Type.String({ default: 'http://localhost:3000' }),
    redirect_urls: Type.Array(Type.String({ maxLength: 2048 }), { default: [] }),
    magic_link: Type.Boolean({ default: false }),
    pkce: Type.Boolean({ default: false }),
    signup_enabled: Type.Boolean({ default: true }),
    anonymous_sign_in: Type.Boolean({ default: false }),
    /** Anonymous sign-ins per hour and client IP (GoTrue RATE_LIMIT_ANONYMOUS_USERS). */
    anonymous_rate_per_hour: Type.Integer({ minimum: 0, default: 30 }),
    /** TOTP factors may be enrolled (GoTrue MFA_TOTP_ENROLL_ENABLED). */
    mfa_totp_enroll: Type.Boolean({ default: true }),
    /** TOTP factors may be challenged and verified (GoTrue MFA_TOTP_VERIFY_ENABLED). */
    mfa_totp_verify: Type.Boolean({ default: true }),
    /** WebAuthn factors may be enrolled (GoTrue MFA_WEB_AUTHN_ENROLL_ENABLED); needs `webauthn`. */
    mfa_webauthn_enroll: Type.Boolean({ default: false }),
    /** WebAuthn factors may be challenged and verified (GoTrue MFA_WEB_AUTHN_VERIFY_ENABLED); needs `webauthn`. */
    mfa_webauthn_verify: Type.Boolean({ default: false }),
    /** Factors a user may hold, verified or not (GoTrue MFA_MAX_ENROLLED_FACTORS). */
    mfa_max_enrolled_factors: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
    /** MFA challenges and verifies per minute and client IP (GoTrue MFA_RATE_LIMIT_CHALLENGE_AND_VERIFY). */
    mfa_rate_per_minute: Type.Integer({ minimum: 0, default: 15 }),
    /** Users may link and unlink identities themselves (GoTrue SECURITY_MANUAL_LINKING_ENABLED). */
    manual_linking: Type.Boolean({ default: false }),
    /** A password change in a session older than 24 h needs the nonce of GET /reauthenticate
     *  (GoTrue SECURITY_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION, "secure password change"). */
    secure_password_change: Type.Boolean({ default: false }),
    /** Mail confirmation on sign-up (GoTrue's !MAILER_AUTOCONFIRM). */
    mail_confirmation: Type.Boolean({ default: false }),
    password_min_length: Type.Integer({ minimum: 6, maximum: 72, default: 6 }),
    /** '' | 'letters_digits' | 'lower_upper_letters_digits' | 'lower_upper_letters_digits_symbols' */
    password_required_characters: Type.String({ default: '' }),
    refresh_token_reuse_interval: Type.Integer({ minimum: 0, default: 10 }),
    /** Refresh tokens issued on sign-in: GoTrue's algorithm 1 (a row per token) or 2 (HMAC-signed, a
     *  counter in the session; GoTrue REFRESH_TOKEN_ALGORITHM_VERSION). With 2, a session of v1 tokens
     *  moves to v2 on its next refresh; tokens of either kind already issued keep working. */
    refresh_token_algorithm_version: Type.Union([Type.Literal(1), Type.Literal(2)], { default: 2 }),
    otp_expiry: Type.Integer({ minimum: 60, default: 3600 }),
    /** Minimum seconds between two mails to one address (GoTrue SMTP max frequency). */
    mail_min_interval: Type.Integer({ minimum: 0, default: 60 }),
    /** Mails per hour for the whole tenant (GoTrue RATE_LIMIT_EMAIL_SENT). */
    mail_rate_per_hour: Type.Integer({ minimum: 0, default: 30 }),
    /** Per-IP request limits (GoTrue's classes and defaults); see DEFAULT_RATE_LIMITS. */
    rate_limits: Type.Optional(RateLimitsSchema),
    providers: Type.Record(Type.String({ pattern: '^[a-z][a-z0-9_-]*$' }), ProviderSchema, {
      default: {},
      maxProperties: 64,
    }),
    smtp: Type.Optional(SmtpSchema),
    mail_templates: Type.Optional(MailTemplatesSchema),
    /** Auth hooks (GoTrue's): custom access token claims, send email, attempts, sign-up check. */
    hooks: Type.Optional(AuthHooksSchema),
    /** Passkey sign-in and registration (GoTrue PASSKEY_ENABLED); needs `webauthn`. */
    passkeys: Type.Boolean({ default: false }),
    /** Passkeys a user may hold (GoTrue PASSKEY_MAX_PASSKEYS_PER_USER). */
    max_passkeys_per_user: Type.Integer({ minimum: 1, maximum: 100, default: 10 }),
    /** The WebAuthn relying party of passkeys (GoTrue WEBAUTHN_RP_ID, _RP_DISPLAY_NAME, _RP_ORIGINS). */
    webauthn: Type.Optional(WebAuthnSchema),
    /** The OAuth 2.1 server (off by default, as in GoTrue). */
    oauth_server: Type.Optional(OAuthServerSchema),
  },
  { additionalProperties: false },
)

/** A tenant file as written by people or by `tenants create`. */
/** rest.extra_search_path when a tenant names none: Supabase's, so extensions in `extensions` resolve unqualified. */
export const DEFAULT_EXTRA_SEARCH_PATH: readonly string[] = Object.freeze(['public', 'extensions'])

export const TenantFileSchema = Type.Object(
  {
    database: Type.String({ pattern: DATABASE_NAME.source }),
    organization: Type.String({ minLength: 1 }),
    /** Owner/admin connection: catalog look-ups, the panel, migrations. */
    postgres: ConnectionUrl('OWNER_PASSWORD'),
    /**
     * Declared secret so that an operator may write them as `${<DB>_ROLE_ANON}` references
     * (deploy/tenants/real-engines/shop.yaml): the names `tenants create` generates; no
     * tenant writes them.
     */
    roles: Type.Object(
      { anon: RoleName, auth: RoleName, svc: RoleName },
      { additionalProperties: false, ...secret('value', 'ROLE_{1}') },
    ),
    jwt: Type.Object(
      {
        secret: Type.String({ minLength: 32, ...secret('value', 'JWT_SECRET') }),
        /** Secret of the tokens the gateway re-signs for the REST upstream (PostgREST's jwt-secret). */
        upstream_secret: Type.String({ minLength: 32, ...secret('value', 'JWT_UPSTREAM_SECRET') }),
        expiry: Type.Integer({ minimum: 30, default: 3600 }),
        /** `iss` of this tenant's tokens; defaults to `<public_url>/<database>/auth/v1`. */
        issuer: Type.Optional(Type.String({ minLength: 1 })),
        aud: Type.String({ default: 'authenticated' }),
        /** What signs new access tokens: the HS256 secret, or the newest signing key of this algorithm. */
        signing_algorithm: Type.Union([Type.Literal('HS256'), Type.Literal('ES256'), Type.Literal('RS256')], {
          default: 'HS256',
        }),
        /** Asymmetric keys; every one verifies (and is published in the JWKS) until it is removed. */
        signing_keys: Type.Array(
          Type.Object(
            {
              kid: Type.String({ pattern: KID.source }),
              alg: Type.Union([Type.Literal('ES256'), Type.Literal('RS256')]),
              /** A private JWK as JSON, or a PKCS#8 PEM. */
              private_key: Type.String({ minLength: 1, maxLength: 16384, ...secret('value', 'SIGNING_KEY_{2+}') }),
            },
            { additionalProperties: false },
          ),
          { default: [], maxItems: 20 },
        ),
        /**
         * Tombstones of revoked signing keys (docs/tenant-state.md): a key listed here never
         * verifies again, whatever `signing_keys` says; nothing removes an entry.
         */
        revoked_keys: Type.Optional(
          Type.Array(
            Type.Object(
              {
                kid: Type.String({ pattern: KID.source }),
                /** RFC 7638 thumbprint of the public key: the same key under another kid is refused too. */
                thumbprint: Type.Optional(Type.String({ minLength: 1 })),
                revoked_at: Type.String({ minLength: 1 }),
                revoked_by: Type.String({ minLength: 1 }),
              },
              { additionalProperties: false },
            ),
            { maxItems: 200 },
          ),
        ),
        /** Set once the legacy HS256 secret is retired: tokens it signs are refused from then on. */
        legacy_secret_retired: Type.Optional(
          Type.Object(
            {
              retired_at: Type.String({ minLength: 1 }),
              retired_by: Type.String({ minLength: 1 }),
            },
            { additionalProperties: false },
          ),
        ),
      },
      { additionalProperties: false },
    ),
    keys: Type.Object(
      {
        public: Type.String({ minLength: 16, ...secret('hashed') }),
        secret: Type.String({ minLength: 16, ...secret('hashed') }),
      },
      { additionalProperties: false },
    ),
    upstreams: Type.Object({ auth: Url, rest: Url }, { additionalProperties: false }),
    /** Connection strings of the engines' login roles (our engines only). */
    engines: Type.Optional(
      Type.Object(
        {
          rest: Type.Optional(ConnectionUrl('REST_PASSWORD')),
          auth: Type.Optional(ConnectionUrl('AUTHN_PASSWORD')),
        },
        { additionalProperties: false },
      ),
    ),
    rest: Type.Object(
      {
        default_limit: Type.Integer({ minimum: 1, default: 1000 }),
        max_limit: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { default: null }),
        max_rows: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { default: null }),
        /** Request bodies larger are refused by the gateway (413); null: gateway.rest_max_body_bytes. */
        max_body_bytes: Type.Union([Type.Integer({ minimum: 1024 }), Type.Null()], { default: null }),
        /** PostgREST's db-aggregates-enabled: `count()`, `col.sum()`, ... in select. */
        aggregates_enabled: Type.Boolean({ default: false }),
        /** PostgREST's db-plan-enabled: `Accept: application/vnd.pgrst.plan` answers the EXPLAIN of the request. */
        plan_enabled: Type.Boolean({ default: false }),
        /** PostgREST's server-timing-enabled: a `Server-Timing` header with the time of each stage. */
        server_timing_enabled: Type.Boolean({ default: false }),
        schemas: Type.Array(Type.String({ minLength: 1 }), { minItems: 1, default: ['public'] }),
        /**
         * PostgREST's db-extra-search-path: schemas after the request's on every request's search
         * path; by default Supabase's (its config.toml `extra_search_path = ["public", "extensions"]`).
         */
        extra_search_path: Type.Array(Type.String({ minLength: 1 }), { default: [...DEFAULT_EXTRA_SEARCH_PATH] }),
        /** PostgREST's db-pre-request: `schema.function` called at the start of every request's transaction. */
        pre_request: Type.Union(
          [Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_$]*\\.[A-Za-z_][A-Za-z0-9_$]*$' }), Type.Null()],
          { default: null },
        ),
        /** PostgREST's app.settings.*: `app.settings.<name>` set in every request's transaction. */
        app_settings: Type.Record(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), Type.String(), {
          default: {},
          ...secret('value', 'APP_SETTING_{2}'),
        }),
        /** PostgREST's openapi-mode: follow-privileges, ignore-privileges or disabled (PGRST126). */
        openapi_mode: Type.Union(
          [Type.Literal('follow-privileges'), Type.Literal('ignore-privileges'), Type.Literal('disabled')],
          { default: 'follow-privileges' },
        ),
        /** PostgREST's db-root-spec: a function of the request's schema the root path calls in place of the OpenAPI document. */
        root_spec: Type.Union([Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_$]*$' }), Type.Null()], { default: null }),
        /**
         * Supabase's default privileges (docs/supabase.md "Default privileges"): what the owner
         * creates in `public` is granted to anon, authenticated and service_role, as in a
         * Supabase project. Off by default: new tables are then reachable with the public key
         * until RLS is enabled on them.
         */
        supabase_default_privileges: Type.Boolean({ default: false }),
        /** PostgREST's openapi-security-active: the OpenAPI document names the JWT bearer scheme. */
        openapi_security_active: Type.Boolean({ default: false }),
        /** PostgREST's server-trace-header: a request header echoed on the answer (e.g. X-Request-Id). */
        server_trace_header: Type.Union([Type.String({ pattern: '^[A-Za-z0-9-]+$' }), Type.Null()], { default: null }),
        /**
         * Request-rate limits of /rest/v1 as Kong's rate-limiting plugin has them, checked by the
         * gateway: per database, per client address and per API key, requests per second and per
         * minute; off unless set (docs/edge.md). Over one: 429 over_request_rate_limit.
         */
        rate_limits: Type.Optional(RestRateLimitsSchema),
      },
      { additionalProperties: false, default: {} },
    ),
    auth: AuthSettingsSchema,
  },
  { additionalProperties: false },
)

/**
 * The bounds of a tenant record (docs/tenant-state.md): a string, a list or a map without a
 * bound of its own gets these, and the whole record, as JSON, is at most `bytes`.
 */
export const RECORD_BOUNDS = { string: 4096, items: 100, entries: 100, name: 128, bytes: 256 * 1024 } as const

/** Gives every string, list and map under `s` that has none the bound of RECORD_BOUNDS. */
function bounded(s: TSchema): void {
  for (const b of (s.anyOf as TSchema[] | undefined) ?? []) bounded(b)
  if (s.type === 'string') s.maxLength ??= RECORD_BOUNDS.string
  if (s.type === 'array') {
    s.maxItems ??= RECORD_BOUNDS.items
    bounded(s.items as TSchema)
  }
  if (s.type !== 'object') return
  for (const p of Object.values((s.properties as Record<string, TSchema> | undefined) ?? {})) bounded(p)
  const patterns = s.patternProperties as Record<string, TSchema> | undefined
  if (patterns === undefined) return
  s.maxProperties ??= RECORD_BOUNDS.entries
  s.propertyNames ??= { maxLength: RECORD_BOUNDS.name }
  for (const p of Object.values(patterns)) bounded(p)
}
bounded(TenantFileSchema)
redactFieldsOf(TenantFileSchema)

export type TenantFile = Static<typeof TenantFileSchema>
export type AuthSettings = Static<typeof AuthSettingsSchema>
export type ProviderSettings = Static<typeof ProviderSchema>
export type RateLimits = Static<typeof RateLimitsSchema>
export type AuthHook = Static<typeof AuthHookSchema>
export type AuthHooks = Static<typeof AuthHooksSchema>
export type WebAuthnSettings = Static<typeof WebAuthnSchema>
export type OAuthServerSettings = Static<typeof OAuthServerSchema>

/** The OAuth 2.1 server settings with GoTrue's defaults (records stored before them have none). */
export function oauthServerOf(auth: Pick<AuthSettings, 'oauth_server'>): OAuthServerSettings {
  return {
    enabled: auth.oauth_server?.enabled ?? false,
    authorization_url_path: auth.oauth_server?.authorization_url_path ?? '/oauth/consent',
    allow_dynamic_registration: auth.oauth_server?.allow_dynamic_registration ?? false,
  }
}
/** One GoTrue token bucket: capacity, rate, interval_seconds. */
export type RateLimitBucket = RateLimits[RateLimitBucketName]

/**
 * A GoTrue token bucket as fixed-window counters count it: at most `capacity` requests per
 * window of capacity / rate x interval_seconds, the same burst and sustained rate.
 */
export function bucketWindow(b: RateLimitBucket): { points: number; duration: number } {
  return { points: b.capacity, duration: Math.max(1, Math.ceil((b.capacity / b.rate) * b.interval_seconds)) }
}

/** A stored key: `sha256:<hex>`. Plain keys never reach the store. */
export type KeyHash = string

/**
 * The runtime tenant record: the file with its API keys replaced by hashes and each signing
 * key's public JWK added. Records stored before signing keys existed have neither
 * `signing_algorithm` nor `signing_keys` (HS256, no keys).
 */
export type Tenant = Omit<TenantFile, 'keys' | 'jwt'> & {
  keys: { public: KeyHash; secret: KeyHash }
  jwt: Omit<TenantFile['jwt'], 'signing_algorithm' | 'signing_keys'> & {
    signing_algorithm?: SigningAlgorithm
    signing_keys?: TenantSigningKey[]
  }
}

export type { RoleKind } from '../shared/index.js'

export function hashKey(key: string): KeyHash {
  return 'sha256:' + createHash('sha256').update(key, 'utf8').digest('hex')
}

/** Constant-time check of a presented key against a stored hash. */
export function keyMatches(presented: string, stored: KeyHash): boolean {
  const a = Buffer.from(hashKey(presented))
  const b = Buffer.from(stored)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** Which kind a presented key is for this tenant, or null. */
export function keyKind(tenant: Tenant, presented: string): 'anon' | 'svc' | null {
  // Both compared every time so timing does not tell which one matched.
  const pub = keyMatches(presented, tenant.keys.public)
  const sec = keyMatches(presented, tenant.keys.secret)
  return sec ? 'svc' : pub ? 'anon' : null
}

/** `iss` of a tenant's tokens. */
export function tenantIssuer(tenant: Pick<Tenant, 'database' | 'jwt'>, publicUrl: string): string {
  return tenant.jwt.issuer ?? `${publicUrl.replace(/\/+$/, '')}/${tenant.database}/auth/v1`
}

const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: false })
const validateFile = ajv.compile(TenantFileSchema)

function describe(e: ErrorObject): string {
  const field = (e.instancePath || '').replace(/^\//, '').replace(/\//g, '.') || '(root)'
  if (e.keyword === 'additionalProperties') {
    return `${field === '(root)' ? '' : field + '.'}${String((e.params as { additionalProperty: string }).additionalProperty)}: unknown field`
  }
  if (e.keyword === 'required') {
    return `${field === '(root)' ? '' : field + '.'}${String((e.params as { missingProperty: string }).missingProperty)}: is required`
  }
  // A map's entry whose name breaks its bound: the error of the name, then `propertyNames`'s own.
  if (e.propertyName !== undefined) return `${field}: an entry's name ${e.message ?? 'is invalid'}`
  return `${field}: ${e.message ?? 'is invalid'}`
}

/** Every problem of a failed validation, one line each (a map's bad entry name once). */
function describeAll(errors: ErrorObject[]): string[] {
  return readableSchemaErrors(errors.filter((e) => e.keyword !== 'propertyNames')).map(describe)
}

/** Role names and settings that depend on each other. */
function settingProblems(f: TenantFile): string[] {
  const problems: string[] = []
  for (const k of ['passkeys', 'mfa_webauthn_enroll', 'mfa_webauthn_verify'] as const) {
    if (f.auth[k] && f.auth.webauthn === undefined)
      problems.push(`auth.${k}: needs auth.webauthn (rp_id, rp_display_name, rp_origins)`)
  }
  for (const k of ROLE_KINDS) {
    if (!/^[A-Za-z_][A-Za-z0-9_$-]*$/.test(f.roles[k])) problems.push(`roles.${k}: not a valid role name`)
  }
  return problems
}

/** What is wrong with a record's connection strings: each must reach the tenant's own database. */
function urlProblems(f: TenantFile): string[] {
  const problems: string[] = []
  // A copy-pasted URL naming another database would serve one tenant from another's data.
  const urls: Array<[string, string | undefined]> = [
    ['postgres', f.postgres],
    ['engines.rest', f.engines?.rest],
    ['engines.auth', f.engines?.auth],
  ]
  for (const [field, url] of urls) {
    if (url === undefined) continue
    let db: string
    try {
      db = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''))
    } catch {
      problems.push(`${field}: not a URL`)
      continue
    }
    if (db !== f.database) problems.push(`${field}: connects to database "${db}", not to "${f.database}"`)
  }
  return problems
}

/** Fields that depend on each other: secrets that must differ, signing keys and the algorithm. */
function crossFieldProblems(f: TenantFile): string[] {
  const problems: string[] = []
  if (f.jwt.secret === f.jwt.upstream_secret) problems.push('jwt.upstream_secret: must differ from jwt.secret')
  if (f.keys.public === f.keys.secret) problems.push('keys.secret: must differ from keys.public')
  const kids = new Set<string>()
  f.jwt.signing_keys.forEach((k, i) => {
    if (kids.has(k.kid)) problems.push(`jwt.signing_keys.${i}.kid: "${k.kid}" is listed twice`)
    kids.add(k.kid)
    const p = signingKeyProblem(k)
    if (p !== null) problems.push(`jwt.signing_keys.${i}.${p}`)
  })
  if (f.jwt.legacy_secret_retired !== undefined && f.jwt.signing_algorithm === 'HS256') {
    problems.push(
      'jwt.signing_algorithm: is HS256 but the legacy secret is retired (jwt.legacy_secret_retired): sign with ES256 or RS256',
    )
  }
  if (f.jwt.signing_algorithm !== 'HS256' && currentSigningKey(f.jwt) === null) {
    problems.push(
      `jwt.signing_algorithm: is ${f.jwt.signing_algorithm} but jwt.signing_keys holds no ${f.jwt.signing_algorithm} key (\`gatehouse tenants keys rotate ${f.database}\` adds one)`,
    )
  }
  return [...problems, ...settingProblems(f), ...urlProblems(f)]
}

/** The record over its size cap: a problem naming its largest sections, or null. */
function sizeProblem(data: unknown): string | null {
  const bytes = Buffer.byteLength(JSON.stringify(data))
  if (bytes <= RECORD_BOUNDS.bytes) return null
  const sections: Array<[string, number]> = []
  for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
    if (v !== null && typeof v === 'object')
      for (const [k2, v2] of Object.entries(v))
        sections.push([`${k}.${k2}`, Buffer.byteLength(JSON.stringify(v2) ?? '')])
  }
  const largest = sections
    .sort((x, y) => y[1] - x[1])
    .slice(0, 3)
    .map(([name, n]) => `${name} ${n}`)
  return `(record): is ${bytes} bytes, over the cap of ${RECORD_BOUNDS.bytes} bytes of a tenant record (largest: ${largest.join(', ')} bytes)`
}

/** Every problem of a record's values (defaults filled into `data`). */
function valueProblems(data: unknown): string[] {
  if (!validateFile(data)) return describeAll(validateFile.errors ?? [])
  const size = sizeProblem(data)
  return [...crossFieldProblems(data as TenantFile), ...(size === null ? [] : [size])]
}

function refuse(source: string, problems: string[]): never {
  throw new ConfigError(
    `invalid tenant file ${source}`,
    problems.map((p) => `${source}: ${redactSecrets(p, { excerpt: false })}`),
  )
}

/**
 * Validates a parsed tenant file: `${ENV}` references expanded in the fields declared secret
 * (nowhere else), then the schema, its bounds and the fields that depend on each other.
 * Throws a ConfigError naming `source` and every bad field. Defaults are filled in.
 */
export function parseTenantFile(
  raw: unknown,
  source: string,
  env: NodeJS.ProcessEnv = tenantFileEnvironment(),
): TenantFile {
  const problems: string[] = []
  const data = structuredClone(expandSecretFields(TenantFileSchema, raw, env, problems))
  if (problems.length === 0) problems.push(...valueProblems(data))
  if (problems.length) refuse(source, problems)
  return data as TenantFile
}

/** Validates a record whose values are literal (made by a program, not read from a file): no `${ENV}` expansion. */
export function validateTenantRecord(raw: unknown, source: string): TenantFile {
  const data = structuredClone(raw)
  const problems = valueProblems(data)
  if (problems.length) refuse(source, problems)
  return data as TenantFile
}

/**
 * The problems of a runtime record a change made (the panel, the CLI, an apply): the file's
 * schema, bounds and size cap, checked on its file form (signing keys without their public
 * JWKs); [] when it is valid.
 */
export function tenantRecordProblems(t: Tenant): string[] {
  const file = {
    ...t,
    jwt: { ...t.jwt, signing_keys: (t.jwt.signing_keys ?? []).map(({ public_jwk: _derived, ...k }) => k) },
  }
  return valueProblems(structuredClone(file)).map((p) => redactSecrets(p, { excerpt: false }))
}

/** A stored key's form (`sha256:<hex>`). */
export const KEY_HASH = /^sha256:[0-9a-f]{64}$/

/** A key as stored: a file may hold the hash itself (`tenants export` writes it so). */
function storedKey(key: string): KeyHash {
  return KEY_HASH.test(key) ? key : hashKey(key)
}

/**
 * The runtime form: API keys hashed, signing keys with their public JWKs. A key the file
 * lists although it is revoked (a tombstone in jwt.revoked_keys) is left out: it never
 * verifies again (revokedKeysListed names them for a warning).
 */
export function toTenant(file: TenantFile): Tenant {
  const keys = (file.jwt.signing_keys ?? []).map(runtimeSigningKey)
  return {
    ...file,
    jwt: { ...file.jwt, signing_keys: withoutRevoked(keys, file.jwt.revoked_keys ?? []) },
    keys: { public: storedKey(file.keys.public), secret: storedKey(file.keys.secret) },
  }
}

/** Masks secrets for display (`tenants show`): every field declared secret (a URL's password). */
export function maskTenant(t: Tenant | TenantFile): Record<string, unknown> {
  return maskSecretFields(TenantFileSchema, t, '****') as Record<string, unknown>
}

/** A record's values as a tenant file must hold them to read back as themselves (`$$` in secret fields). */
export function fileValues(file: TenantFile): unknown {
  return escapeSecretFields(TenantFileSchema, file)
}

/** `value`, the record's part at `path`, with its secret fields masked by `mask`. */
export function maskRecordPart<T>(value: T, path: readonly string[], mask: string): T {
  return maskSecretFields(TenantFileSchema, value, mask, path) as T
}
