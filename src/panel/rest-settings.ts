// The per-database REST engine switches the panel shows and changes (PostgREST's
// db-aggregates-enabled as `aggregates_enabled`): the view, and a validated merge of a
// PATCH into the tenant's `rest` settings. Limits, schemas and keys are not changed here.
import { ValidationError } from './errors.js'
import type { TenantFile } from '../tenants/index.js'

type RestSettings = TenantFile['rest']

/** Fields a PATCH may change, each a boolean switch. */
export const REST_PATCHABLE = ['aggregates_enabled'] as const

export interface RestSettingsView {
  aggregates_enabled: boolean
}

export function restSettingsView (r: RestSettings): RestSettingsView {
  return { aggregates_enabled: r.aggregates_enabled === true }
}

/** Merges a PATCH body into `current`; throws ValidationError (400) naming every bad field. */
export function applyRestSettingsPatch (current: RestSettings, patch: unknown): RestSettings {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) throw new ValidationError('send a JSON object of settings to change')
  const body = patch as Record<string, unknown>
  const problems: string[] = []
  if (Object.keys(body).length === 0) problems.push('(body): name at least one setting to change')
  for (const [k, v] of Object.entries(body)) {
    if (!(REST_PATCHABLE as readonly string[]).includes(k)) problems.push(`${k}: not a setting the panel changes (allowed: ${REST_PATCHABLE.join(', ')})`)
    else if (typeof v !== 'boolean') problems.push(`${k}: must be boolean`)
  }
  if (problems.length > 0) throw new ValidationError(problems.join('; '))
  return { ...structuredClone(current), aggregates_enabled: body.aggregates_enabled as boolean }
}
