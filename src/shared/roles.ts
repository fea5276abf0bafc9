// The request roles' vocabulary, in one place: the three kinds a caller can be (anon,
// auth, svc), the `role` claim each carries in tokens (GoTrue's and PostgREST's names:
// anon, authenticated, service_role), and the name messages use for it (the claim name,
// so one caller reads the same in gateway, engines, panel and provisioning).
// Look-ups by client input go through Maps: `constructor` or `__proto__` is no role.

/** The request role kinds; `platform.role(kind)` takes these, tenant records key by them. */
export const ROLE_KINDS = ['anon', 'auth', 'svc'] as const
export type RoleKind = (typeof ROLE_KINDS)[number]

/** The `role` claim of each kind, as supabase-js, GoTrue and PostgREST know it. */
export const ROLE_CLAIMS = { anon: 'anon', auth: 'authenticated', svc: 'service_role' } as const
export type RoleClaim = (typeof ROLE_CLAIMS)[RoleKind]

const KIND_OF_CLAIM: ReadonlyMap<string, RoleKind> = new Map(ROLE_KINDS.map((k) => [ROLE_CLAIMS[k], k]))

/** The claim of a kind (`auth` -> `authenticated`): also the name every message gives the caller. */
export function roleClaim(kind: RoleKind): RoleClaim {
  return ROLE_CLAIMS[kind]
}

/** The kind a `role` claim stands for, or null for anything else (inherited names included). */
export function kindOfClaim(claim: unknown): RoleKind | null {
  return typeof claim === 'string' ? (KIND_OF_CLAIM.get(claim) ?? null) : null
}

/** `anon (t_abc_anon)`: the name the caller knows and the database's real role. */
export function roleLabel(roles: Readonly<Record<RoleKind, string>>, kind: RoleKind): string {
  return `${ROLE_CLAIMS[kind]} (${roles[kind]})`
}

/** `authenticated, anon or service_role`: the accepted claims, for messages. */
export const ACCEPTED_CLAIMS_TEXT = `${ROLE_CLAIMS.auth}, ${ROLE_CLAIMS.anon} or ${ROLE_CLAIMS.svc}`

/** The request kind of one of a tenant's Postgres role names, or null. */
export function kindOfRoleName(roles: Readonly<Record<RoleKind, string>>, name: string): RoleKind | null {
  for (const k of ROLE_KINDS) if (roles[k] === name) return k
  return null
}
