// auth.oauth_clients (GoTrue's OAuth server clients, migration 0220): the apps this database
// signs users in for. The row id is the public client_id; the secret is stored only as its
// SHA-256 (base64url); redirect URIs are a text[] (migration 0275: GoTrue joins them with commas,
// which split a URI holding one) and grant types a comma-joined list as GoTrue keeps them.
// A deleted client keeps its row with deleted_at set and is never found again
// (docs/auth-protocol.md §3.22). Values are parameters; times from ctx.now().
import type { Queryable } from '../../shared/index.js'

export type ClientType = 'public' | 'confidential'
export type TokenEndpointAuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post'

export interface OAuthClientRow {
  id: string
  client_secret_hash: string | null
  registration_type: 'dynamic' | 'manual'
  client_type: ClientType
  token_endpoint_auth_method: TokenEndpointAuthMethod
  redirect_uris: string[]
  grant_types: string
  client_name: string | null
  client_uri: string | null
  logo_uri: string | null
  created_at: Date
  updated_at: Date
}

/** The fields a registration or an update writes. */
export interface OAuthClientFields {
  client_secret_hash?: string | null
  token_endpoint_auth_method?: TokenEndpointAuthMethod
  redirect_uris?: string[]
  grant_types?: string
  client_name?: string | null
  client_uri?: string | null
  logo_uri?: string | null
}

const CLIENT_SELECT = `id, client_secret_hash, registration_type, client_type, token_endpoint_auth_method,
  redirect_uris, grant_types, client_name, client_uri, logo_uri, created_at, updated_at`

export async function insertOAuthClient(
  q: Queryable,
  c: Required<OAuthClientFields> & { id: string; registration_type: string; client_type: ClientType; now: Date },
): Promise<OAuthClientRow> {
  const r = await q.query<OAuthClientRow>(
    `INSERT INTO auth.oauth_clients (id, client_secret_hash, registration_type, client_type,
       token_endpoint_auth_method, redirect_uris, grant_types, client_name, client_uri, logo_uri, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING ${CLIENT_SELECT}`,
    [
      c.id,
      c.client_secret_hash,
      c.registration_type,
      c.client_type,
      c.token_endpoint_auth_method,
      c.redirect_uris,
      c.grant_types,
      c.client_name,
      c.client_uri,
      c.logo_uri,
      c.now,
    ],
  )
  return r.rows[0]!
}

/** A client that is not deleted, or null. */
export async function findOAuthClient(q: Queryable, id: string): Promise<OAuthClientRow | null> {
  const r = await q.query<OAuthClientRow>(
    `SELECT ${CLIENT_SELECT} FROM auth.oauth_clients WHERE id = $1 AND deleted_at IS NULL`,
    [id],
  )
  return r.rows[0] ?? null
}

/** A page of the clients that are not deleted, newest first, and how many there are. */
export async function listOAuthClients(
  q: Queryable,
  page: { limit: number | null; offset: number },
): Promise<{ clients: OAuthClientRow[]; total: number }> {
  const r = await q.query<OAuthClientRow & { total: string }>(
    `SELECT ${CLIENT_SELECT}, count(*) OVER () AS total FROM auth.oauth_clients WHERE deleted_at IS NULL
     ORDER BY created_at DESC, id LIMIT $1 OFFSET $2`,
    [page.limit, page.offset],
  )
  if (r.rows.length > 0) return { clients: r.rows, total: Number(r.rows[0]!.total) }
  const c = await q.query<{ n: string }>(`SELECT count(*) AS n FROM auth.oauth_clients WHERE deleted_at IS NULL`)
  return { clients: [], total: Number(c.rows[0]!.n) }
}

const UPDATABLE = [
  'client_secret_hash',
  'token_endpoint_auth_method',
  'redirect_uris',
  'grant_types',
  'client_name',
  'client_uri',
  'logo_uri',
] as const

/** Changes the given fields of a client that is not deleted; null when there is none. */
export async function updateOAuthClient(
  q: Queryable,
  id: string,
  fields: OAuthClientFields,
  now: Date,
): Promise<OAuthClientRow | null> {
  const sets: string[] = []
  const values: unknown[] = [id, now]
  for (const k of UPDATABLE) {
    if (fields[k] === undefined) continue
    values.push(fields[k])
    sets.push(`${k} = $${values.length}`)
  }
  const r = await q.query<OAuthClientRow>(
    `UPDATE auth.oauth_clients SET ${[...sets, 'updated_at = $2'].join(', ')}
     WHERE id = $1 AND deleted_at IS NULL RETURNING ${CLIENT_SELECT}`,
    values,
  )
  return r.rows[0] ?? null
}

/** Soft-deletes a client (GoTrue keeps the row with deleted_at); false when there was none. */
export async function deleteOAuthClient(q: Queryable, id: string, now: Date): Promise<boolean> {
  const r = await q.query(
    `UPDATE auth.oauth_clients SET deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL`,
    [id, now],
  )
  return (r.rowCount ?? 0) > 0
}
