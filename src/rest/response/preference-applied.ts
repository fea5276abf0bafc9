// The Preference-Applied header (docs/rest-protocol.md §3.7, RFC 7240): the preferences that took
// effect, `, `-joined in PostgREST's fixed order: resolution, missing, return, count, tx,
// handling, timezone, max-affected. Which families a request echoes depends on its kind;
// the caller says which apply. Pure.
import type { Preferences } from '../api-request/types.js'

interface AppliedFamilies {
  /** POST on a table with a PK or on_conflict. */
  resolution?: boolean
  /** POST and PATCH. */
  missing?: boolean
  /** Writes. */
  return?: boolean
  /** Prefer: tx is honoured. */
  tx?: boolean
  /** PATCH, DELETE and RPC (only with handling=strict). */
  maxAffected?: boolean
}

/** The header's value, or null when nothing applies. */
export function preferenceApplied(p: Preferences, families: AppliedFamilies): string | null {
  const out: string[] = []
  if (families.resolution && p.resolution !== null) out.push(`resolution=${p.resolution}`)
  if (families.missing && p.missing !== null) out.push(`missing=${p.missing}`)
  if (families.return && p.return !== null) out.push(`return=${p.return}`)
  if (p.count !== null) out.push(`count=${p.count}`)
  if (families.tx && p.tx !== null) out.push(`tx=${p.tx}`)
  if (p.handling !== null) out.push(`handling=${p.handling}`)
  if (p.timezone !== null) out.push(`timezone=${p.timezone}`)
  if (families.maxAffected && p.handling === 'strict' && p.maxAffected !== null)
    out.push(`max-affected=${p.maxAffected}`)
  return out.length === 0 ? null : out.join(', ')
}
