// The panel's settings routes: auth and REST settings, signing keys, the change history,
// the policy check and the generated types. A change is a compare-and-set with the
// record's version (If-Match, ETag), audited (docs/tenant-state.md).
import type { FastifyReply, FastifyRequest } from 'fastify'
import type pg from 'pg'
import {
  tenantRecordProblems,
  updateTenant,
  type Tenant,
  type TenantStore,
  type UpdateResult,
} from '../tenants/index.js'
import { isGatehouseError } from '../shared/index.js'
import { setSupabaseDefaultPrivileges } from '../platform/index.js'
import { generateTypescriptTypes, parseSchemaList } from '../typegen/index.js'
import { applyAuthSettingsPatch, checkProviderUrls, maskAuthSettings } from './auth-settings.js'
import { panelContext } from './context.js'
import { DatabaseNotFoundError, DatabaseUnavailableError, SettingsReadOnlyError } from './errors.js'
import { checkPolicies } from './policy-check.js'
import { applyRestSettingsPatch, restSettingsView } from './rest-settings.js'
import type { PanelRouteDeps } from './route-deps.js'
import { retiredLegacyJwt, revokedJwt, rotatedJwt, signingKeysView } from './signing-keys.js'

/** A version as an ETag (a strong validator, RFC 9110 8.8.3). */
function etagOf(version: string): string {
  return `"${version}"`
}

/** The version an If-Match header names (`*` for any), or undefined without one. */
function ifMatchOf(header: string | string[] | undefined): string | undefined {
  const v = (Array.isArray(header) ? header[0] : header)?.split(',')[0]?.trim()
  if (v === undefined || v === '') return undefined
  if (v === '*') return '*'
  return v.replace(/^W\//, '').replace(/^"(.*)"$/, '$1')
}

/** Changes the request's tenant record in the store with `fn` (404 when it is not the organization's). */
async function change(
  deps: PanelRouteDeps,
  req: FastifyRequest,
  reply: FastifyReply,
  action: string,
  fn: (t: Tenant) => Tenant | Promise<Tenant>,
): Promise<UpdateResult> {
  const { organization, database, session } = panelContext(req)
  const store = writableStore(deps)
  const notOurs = (): never => {
    throw new DatabaseNotFoundError(organization, database)
  }
  let r: UpdateResult
  try {
    r = await updateTenant(store, database, fn, {
      who: session.userId,
      via: 'panel',
      action,
      ifMatch: ifMatchOf(req.headers['if-match']),
      check: (t) => {
        if (t.organization !== organization) notOurs()
      },
    })
  } catch (err) {
    if (isGatehouseError(err) && err.code === 'tenant_not_in_store') notOurs()
    throw err
  }
  if (r.entry !== null) req.log.info({ audit: r.entry }, `tenant ${database} changed from the panel (${action})`)
  void reply.header('etag', etagOf(r.version))
  return r
}

function writableStore(deps: PanelRouteDeps): TenantStore {
  if (deps.store === undefined) throw new SettingsReadOnlyError()
  return deps.store
}

/** The record's version as an ETag (GET), read from the store itself. */
async function tagged(deps: PanelRouteDeps, reply: FastifyReply, database: string): Promise<void> {
  const v = await deps.store?.read(database)
  if (v) void reply.header('etag', etagOf(v.version))
}

export async function getAuthSettings(
  deps: PanelRouteDeps,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  const { tenant, database } = panelContext(req)
  await tagged(deps, reply, database)
  return { database, settings: maskAuthSettings(tenant.auth) }
}

export async function patchAuthSettings(
  deps: PanelRouteDeps,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  const { database } = panelContext(req)
  const r = await change(deps, req, reply, 'auth-settings', async (current) => {
    const auth = applyAuthSettingsPatch(current.auth, req.body)
    await checkProviderUrls(req.body, auth, { allowHosts: deps.config.outbound.allow_hosts })
    return { ...current, auth }
  })
  return { database, settings: maskAuthSettings(r.tenant.auth) }
}

export async function getRestSettings(
  deps: PanelRouteDeps,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  const { tenant, database } = panelContext(req)
  await tagged(deps, reply, database)
  return { database, settings: restSettingsView(tenant.rest) }
}

export async function patchRestSettings(
  deps: PanelRouteDeps,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  const { database } = panelContext(req)
  const r = await change(deps, req, reply, 'rest-settings', async (current) => {
    const next = { ...current, rest: applyRestSettingsPatch(current.rest, req.body) }
    // The database first, once the record is known to be valid: a record saying what the
    // database does not do is not written. Named in the PATCH, it is applied even when the
    // record already says it (the way to repair what `tenants check` reports).
    if (Object.hasOwn(req.body as object, 'supabase_default_privileges') && tenantRecordProblems(next).length === 0)
      await asOwner(deps, current, (c) =>
        setSupabaseDefaultPrivileges(c, next.rest.supabase_default_privileges === true),
      )
    return next
  })
  return { database, settings: restSettingsView(r.tenant.rest) }
}

/** `fn` on a connection of the database's owner (503 when it cannot be reached or fails). */
async function asOwner<T>(deps: PanelRouteDeps, tenant: Tenant, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient | undefined
  try {
    client = await deps.ownerPools.get(tenant.database, tenant.postgres).connect()
    return await fn(client)
  } catch (err) {
    throw new DatabaseUnavailableError({ cause: err, internal: err })
  } finally {
    client?.release()
  }
}

export async function getSigningKeys(deps: PanelRouteDeps, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { tenant, database } = panelContext(req)
  await tagged(deps, reply, database)
  return { database, ...signingKeysView(tenant) }
}

export async function postRotate(deps: PanelRouteDeps, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { database } = panelContext(req)
  let kid = ''
  const r = await change(deps, req, reply, 'rotate', async (current) => {
    const rotated = await rotatedJwt(current, req.body)
    kid = rotated.kid
    return { ...current, jwt: rotated.jwt }
  })
  return { database, rotated: kid, ...signingKeysView(r.tenant) }
}

export async function deleteLegacy(deps: PanelRouteDeps, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { database, session } = panelContext(req)
  const r = await change(deps, req, reply, 'retire-legacy', (current) => ({
    ...current,
    jwt: retiredLegacyJwt(current, session.userId),
  }))
  return { database, legacy_secret_retired: r.tenant.jwt.legacy_secret_retired, ...signingKeysView(r.tenant) }
}

export async function deleteSigningKey(
  deps: PanelRouteDeps,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<unknown> {
  const { database, session } = panelContext(req)
  const kid = (req.params as { kid: string }).kid
  const r = await change(deps, req, reply, 'revoke', (current) => ({
    ...current,
    jwt: revokedJwt(current, database, kid, session.userId),
  }))
  return { database, revoked: kid, ...signingKeysView(r.tenant) }
}

export async function getHistory(deps: PanelRouteDeps, req: FastifyRequest): Promise<unknown> {
  const { database } = panelContext(req)
  const store = writableStore(deps)
  return { database, entries: await store.history(database) }
}

export async function getPolicyCheck(deps: PanelRouteDeps, req: FastifyRequest): Promise<unknown> {
  const { tenant, database } = panelContext(req)
  try {
    const policies = await checkPolicies(deps.ownerPools.get(database, tenant.postgres), tenant)
    return { database, count: policies.length, policies }
  } catch (err) {
    throw new DatabaseUnavailableError({ cause: err, internal: err })
  }
}

/**
 * The database's generated types (Supabase Management API's
 * `GET /v1/projects/{ref}/types/typescript?included_schemas=`: `{ types }`).
 */
export async function getTypescriptTypes(deps: PanelRouteDeps, req: FastifyRequest): Promise<unknown> {
  const { tenant } = panelContext(req)
  const asked = (req.query as { included_schemas?: string | string[] }).included_schemas
  const schemas = parseSchemaList(asked === undefined ? [] : Array.isArray(asked) ? asked : [asked])
  const types = await asOwner(deps, tenant, (c) =>
    generateTypescriptTypes(c, { schemas: schemas.length > 0 ? schemas : tenant.rest.schemas }),
  )
  return { types }
}
