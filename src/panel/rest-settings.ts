// The per-database REST settings the panel shows and changes: the engine switches
// (PostgREST's db-aggregates-enabled as `aggregates_enabled`, db-plan-enabled as `plan_enabled`,
// server-timing-enabled as `server_timing_enabled`) and the gateway's request-rate
// limits of /rest/v1 (`rate_limits`, docs/edge.md), Supabase's default privileges
// (`supabase_default_privileges`, docs/supabase.md; the route applies them to the database): the view, and a validated merge of a
// PATCH into the tenant's `rest` settings. Other limits, schemas and keys are not changed here.
import { ValidationError } from './errors.js'
import { MASKED_SECRET } from './auth-settings.js'
import { DEFAULT_EXTRA_SEARCH_PATH, maskRecordPart, type RestRateLimits, type TenantFile } from '../tenants/index.js'

type RestSettings = TenantFile['rest']

/** Fields a PATCH may change. */
const REST_PATCHABLE = [
  'aggregates_enabled',
  'plan_enabled',
  'server_timing_enabled',
  'rate_limits',
  'extra_search_path',
  'pre_request',
  'app_settings',
  'openapi_mode',
  'server_trace_header',
  'root_spec',
  'openapi_security_active',
  'supabase_default_privileges',
] as const

const IDENT = '[A-Za-z_][A-Za-z0-9_$]*'
const OPENAPI_MODES = ['follow-privileges', 'ignore-privileges', 'disabled'] as const

/**
 * PostgREST's other per-database settings: each checked and written as it is (null clears a
 * nullable one); pushes `<field>: why` on a bad value.
 */
function patchSetting(next: RestSettings, k: string, v: unknown, problems: string[]): void {
  switch (k) {
    case 'extra_search_path':
      if (!Array.isArray(v) || v.length > 20 || !v.every((x) => typeof x === 'string' && x !== ''))
        problems.push(`${k}: must be a list of schema names`)
      else next.extra_search_path = [...v] as string[]
      return
    case 'pre_request':
      if (v !== null && (typeof v !== 'string' || !new RegExp(`^${IDENT}\\.${IDENT}$`).test(v)))
        problems.push(`${k}: must be schema.function, or null`)
      else next.pre_request = v
      return
    case 'app_settings':
      if (v === null) {
        next.app_settings = {}
        return
      }
      if (
        typeof v !== 'object' ||
        Array.isArray(v) ||
        !Object.entries(v as object).every(
          ([name, x]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && typeof x === 'string',
        )
      ) {
        problems.push(`${k}: must be an object of setting name -> text value, or null`)
      } else next.app_settings = { ...(v as Record<string, string>) }
      return
    case 'openapi_mode':
      if (!(OPENAPI_MODES as readonly unknown[]).includes(v))
        problems.push(`${k}: must be one of ${OPENAPI_MODES.join(', ')}`)
      else next.openapi_mode = v as (typeof OPENAPI_MODES)[number]
      return
    case 'root_spec':
      // A function of the request's schema, called as /rpc/<root_spec> (its name is quoted as
      // an identifier there): the tenant file's pattern, so the stored record stays valid.
      if (v !== null && (typeof v !== 'string' || v.length > 63 || !new RegExp(`^${IDENT}$`).test(v)))
        problems.push(`${k}: must be a function name (letters, digits, _ and $, not starting with a digit), or null`)
      else next.root_spec = v
      return
    case 'server_trace_header':
      if (v !== null && (typeof v !== 'string' || !/^[A-Za-z0-9-]{1,100}$/.test(v)))
        problems.push(`${k}: must be a header name, or null`)
      else next.server_trace_header = v
  }
}

/** The switches among them (booleans). */
const SWITCHES = [
  'aggregates_enabled',
  'plan_enabled',
  'server_timing_enabled',
  'openapi_security_active',
  'supabase_default_privileges',
] as const

export interface RestSettingsView {
  aggregates_enabled: boolean
  plan_enabled: boolean
  server_timing_enabled: boolean
  extra_search_path: string[]
  pre_request: string | null
  /** app.settings names, values masked (they often hold secrets). */
  app_settings: Record<string, string>
  openapi_mode: string
  root_spec: string | null
  openapi_security_active: boolean
  server_trace_header: string | null
  /** Supabase's default privileges on what the owner creates in `public` (docs/supabase.md). */
  supabase_default_privileges: boolean
  /** The request-rate limits set, or null (none: off, the default). */
  rate_limits: RestRateLimits | null
}

const SCOPES = ['database', 'client', 'key'] as const
const PERIODS = ['second', 'minute'] as const

export function restSettingsView(r: RestSettings): RestSettingsView {
  return {
    aggregates_enabled: r.aggregates_enabled === true,
    plan_enabled: r.plan_enabled === true,
    server_timing_enabled: r.server_timing_enabled === true,
    extra_search_path: [...(r.extra_search_path ?? DEFAULT_EXTRA_SEARCH_PATH)],
    pre_request: r.pre_request ?? null,
    app_settings: maskRecordPart(r.app_settings ?? {}, ['rest', 'app_settings'], MASKED_SECRET),
    openapi_mode: r.openapi_mode ?? 'follow-privileges',
    root_spec: r.root_spec ?? null,
    openapi_security_active: r.openapi_security_active === true,
    server_trace_header: r.server_trace_header ?? null,
    supabase_default_privileges: r.supabase_default_privileges === true,
    rate_limits: r.rate_limits ?? null,
  }
}

/**
 * A PATCH of rate_limits: null clears them all; an object sets the scopes it names (a scope
 * null, or a period null, clears that one). Problems are pushed as `rate_limits.<path>: why`.
 */
function patchRateLimits(
  current: RestRateLimits | undefined,
  v: unknown,
  problems: string[],
): RestRateLimits | undefined {
  if (v === null) return undefined
  if (typeof v !== 'object' || Array.isArray(v)) {
    problems.push('rate_limits: must be an object of database, client, key, or null')
    return current
  }
  const out: RestRateLimits = structuredClone(current ?? {})
  for (const [scope, windows] of Object.entries(v as Record<string, unknown>)) {
    if (!(SCOPES as readonly string[]).includes(scope)) {
      problems.push(`rate_limits.${scope}: not a scope (allowed: ${SCOPES.join(', ')})`)
      continue
    }
    const s = scope as (typeof SCOPES)[number]
    if (windows === null) {
      delete out[s]
      continue
    }
    if (typeof windows !== 'object' || Array.isArray(windows)) {
      problems.push(`rate_limits.${s}: must be an object of second, minute, or null`)
      continue
    }
    const next = { ...(out[s] ?? {}) }
    for (const [period, n] of Object.entries(windows as Record<string, unknown>)) {
      if (!(PERIODS as readonly string[]).includes(period)) {
        problems.push(`rate_limits.${s}.${period}: not a period (allowed: ${PERIODS.join(', ')})`)
        continue
      }
      const p = period as (typeof PERIODS)[number]
      if (n === null) delete next[p]
      else if (typeof n === 'number' && Number.isInteger(n) && n >= 1) next[p] = n
      else problems.push(`rate_limits.${s}.${p}: must be a positive integer (requests), or null`)
    }
    if (Object.keys(next).length === 0) delete out[s]
    else out[s] = next
  }
  return Object.keys(out).length === 0 ? undefined : out
}

/** Merges a PATCH body into `current`; throws ValidationError (400) naming every bad field. */
export function applyRestSettingsPatch(current: RestSettings, patch: unknown): RestSettings {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch))
    throw new ValidationError('send a JSON object of settings to change')
  const body = patch as Record<string, unknown>
  const problems: string[] = []
  if (Object.keys(body).length === 0) problems.push('(body): name at least one setting to change')
  const next: RestSettings = structuredClone(current)
  for (const [k, v] of Object.entries(body)) {
    if (!(REST_PATCHABLE as readonly string[]).includes(k))
      problems.push(`${k}: not a setting the panel changes (allowed: ${REST_PATCHABLE.join(', ')})`)
    else if ((SWITCHES as readonly string[]).includes(k)) {
      if (typeof v !== 'boolean') problems.push(`${k}: must be boolean`)
      else next[k as (typeof SWITCHES)[number]] = v
    } else if (k !== 'rate_limits') {
      patchSetting(next, k, v, problems)
    } else {
      const limits = patchRateLimits(current.rate_limits, v, problems)
      if (limits === undefined) delete next.rate_limits
      else next.rate_limits = limits
    }
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '))
  return next
}
