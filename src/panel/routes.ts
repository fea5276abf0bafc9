// The panel's database routes under /organizations/:org/databases/:db/api: the app-session
// exchange, the test query, the auth and REST settings and the policy check. Each handler reads the
// guarded context (context.ts) and answers JSON; errors are thrown and rendered by index.ts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config/index.js'
import type { AuthService } from '../auth/index.js'
import type { RefusalExplainer } from '../gateway/index.js'
import { updateTenant, type Tenant, type TenantStore, type UpdateResult } from '../tenants/index.js'
import { isGatehouseError } from '../shared/index.js'
import { applyAuthSettingsPatch, checkProviderUrls, maskAuthSettings } from './auth-settings.js'
import { applyRestSettingsPatch, restSettingsView } from './rest-settings.js'
import { retiredLegacyJwt, revokedJwt, rotatedJwt, signingKeysView } from './signing-keys.js'
import { panelContext } from './context.js'
import {
  DatabaseNotFoundError, DatabaseUnavailableError, EngineNotConfiguredError, QueryError, ResultTooLargeError, QueryTimeoutError, SettingsReadOnlyError, TestQueryLoginError
} from './errors.js'
import { checkPolicies } from './policy-check.js'
import { generateTypescriptTypes, parseSchemaList } from '../typegen/index.js'
import type { PanelPools } from './pools.js'
import type { ExchangeLimiter } from './exchange-limit.js'
import {
  kindOfAs, isServerError, leadingKeyword, ResultTooLarge, parseTestQuery, runTestQuery, statementNeeds, testQueryLogin, testQueryUrl
} from './test-query.js'

export interface PanelRouteDeps {
  config: Config
  store?: TenantStore
  auth: AuthService
  explainer: RefusalExplainer
  /** Pools on the tenants' REST engine logins (test queries). */
  restPools: PanelPools
  /** Pools on the tenants' owner connections (policy check). */
  ownerPools: PanelPools
  /** The exchange's sign-in limit per database and panel user. */
  exchangeLimiter: ExchangeLimiter
}

/** The documented lifetime of an exchanged access token (docs/service.md §9). */
export const EXCHANGE_EXPIRES_IN = 3600

/** Errors of the connection itself (not of a statement) are a 503. */
function connectionFailure (err: unknown): boolean {
  if (isServerError(err)) return err.code.startsWith('08') || err.code === '57P01' || err.code === '53300' || err.code === '28P01' || err.code === '3D000'
  const code = (err as { code?: unknown })?.code
  const msg = String((err as { message?: unknown })?.message ?? '')
  return typeof code === 'string' ? /^E[A-Z]+/.test(code) : /timeout|terminated|Connection/i.test(msg)
}

/** A version as an ETag (a strong validator, RFC 9110 8.8.3). */
export function etagOf (version: string): string {
  return `"${version}"`
}

/** The version an If-Match header names (`*` for any), or undefined without one. */
export function ifMatchOf (header: string | string[] | undefined): string | undefined {
  const v = (Array.isArray(header) ? header[0] : header)?.split(',')[0]?.trim()
  if (v === undefined || v === '') return undefined
  if (v === '*') return '*'
  return v.replace(/^W\//, '').replace(/^"(.*)"$/, '$1')
}

export function panelRoutes (deps: PanelRouteDeps) {
  return async function routes (scope: FastifyInstance): Promise<void> {
    // ---- POST app-session: the panel session for a database session -----------------------
    scope.post('/app-session', async (req) => {
      const { tenant, session, database } = panelContext(req)
      if (!tenant.engines?.auth) throw new EngineNotConfiguredError(database, 'auth engine')
      await deps.exchangeLimiter.consume(tenant, session.userId)
      // The exchange's access token lives 3600 s whatever the tenant's own expiry (docs/service.md §8).
      const t = tenant.jwt.expiry === EXCHANGE_EXPIRES_IN ? tenant : { ...tenant, jwt: { ...tenant.jwt, expiry: EXCHANGE_EXPIRES_IN } }
      // Never hand a member an account the exchange did not establish as theirs: link only to
      // a user that already has this panel identity, or whose address was proven by a mail
      // round trip; when a stranger holds the address unproven, the member gets a user of
      // their own, linked by the panel identity alone (docs/edge.md).
      const r = await deps.auth.findOrCreateUserByIdentity({
        tenant: t,
        provider: 'panel',
        providerId: session.userId,
        email: session.email,
        emailVerified: session.emailVerified,
        requireEmailProof: true
      })
      const user = r.user as { id: string, email?: string | null }
      return {
        url: `${deps.config.public_url.replace(/\/+$/, '')}/${database}`,
        access_token: r.session.access_token,
        refresh_token: r.session.refresh_token,
        expires_in: EXCHANGE_EXPIRES_IN,
        token_type: 'bearer',
        user: { id: user.id, email: user.email ?? '' }
      }
    })

    // ---- POST test-query: one statement under a request role, always rolled back ----------
    scope.post('/test-query', async (req, reply) => {
      const { tenant, database } = panelContext(req)
      const request = parseTestQuery(req.body)
      const url = tenant.engines?.rest
      if (!url) throw new EngineNotConfiguredError(database, 'REST engine')
      const timeoutMs = deps.config.panel.test_query_timeout_ms
      const kind = kindOfAs(request.as)
      try {
        return await runTestQuery({
          pool: deps.restPools.get(database, testQueryUrl(url, tenant, kind)),
          tenant,
          request,
          publicUrl: deps.config.public_url,
          timeoutMs,
          maxRows: deps.config.panel.test_query_max_rows,
          maxBytes: deps.config.panel.test_query_max_bytes
        })
      } catch (err) {
        if (err instanceof ResultTooLarge) throw new ResultTooLargeError(err.maxBytes, { cause: err })
        if (isServerError(err) && (err.code === '28P01' || err.code === '28000')) {
          const login = testQueryLogin(tenant, kind)
          throw new TestQueryLoginError(database, login, {
            cause: err,
            hint: `Run \`gatehouse tenants migrate ${database}\`: it creates ${login} (a NOINHERIT member of ${tenant.roles[kind]} only) ` +
              'with the REST engine login\'s password; after a change of that password, run it again.'
          })
        }
        if (!isServerError(err) || connectionFailure(err)) {
          if (connectionFailure(err)) throw new DatabaseUnavailableError({ cause: err, internal: err })
          throw err
        }
        if (err.code === '57014') throw new QueryTimeoutError(timeoutMs, { cause: err })
        const { needs, action } = statementNeeds(leadingKeyword(request.sql))
        const refusal = await deps.explainer.explain({
          tenant,
          kind,
          error: { code: err.code, message: err.message, details: err.detail ?? null, hint: err.hint ?? null },
          needs,
          action
        })
        if (refusal !== null) {
          // The same body as the gateway's refusal; no WWW-Authenticate here (the panel
          // session is fine: it is the tested role that was refused).
          const { 'www-authenticate': _omit, ...headers } = refusal.headers
          return reply.code(refusal.status).headers(headers).send({ ...refusal.body, rolled_back: true })
        }
        throw new QueryError(err.message, {
          cause: err,
          details: err.detail ?? null,
          hint: err.hint ?? null,
          extra: { sqlstate: err.code, ...(err.position !== undefined ? { position: Number(err.position) } : {}), rolled_back: true }
        })
      }
    })

    // ---- changes: compare-and-set with the record's version, audited (docs/tenant-state.md) ----
    const change = async (req: FastifyRequest, reply: FastifyReply, action: string, fn: (t: Tenant) => Tenant | Promise<Tenant>): Promise<UpdateResult> => {
      const { organization, database, session } = panelContext(req)
      const store = deps.store
      if (store === undefined) throw new SettingsReadOnlyError()
      const notOurs = (): never => { throw new DatabaseNotFoundError(organization, database) }
      let r: UpdateResult
      try {
        r = await updateTenant(store, database, fn, {
          who: session.userId,
          via: 'panel',
          action,
          ifMatch: ifMatchOf(req.headers['if-match']),
          check: (t) => { if (t.organization !== organization) notOurs() }
        })
      } catch (err) {
        if (isGatehouseError(err) && err.code === 'tenant_not_in_store') notOurs()
        throw err
      }
      if (r.entry !== null) req.log.info({ audit: r.entry }, `tenant ${database} changed from the panel (${action})`)
      void reply.header('etag', etagOf(r.version))
      return r
    }
    /** The record's version as an ETag (GET), read from the store itself. */
    const tagged = async (reply: FastifyReply, database: string): Promise<void> => {
      const v = await deps.store?.read(database)
      if (v) void reply.header('etag', etagOf(v.version))
    }

    // ---- GET / PATCH auth-settings ---------------------------------------------------------
    scope.get('/auth-settings', async (req, reply) => {
      const { tenant, database } = panelContext(req)
      await tagged(reply, database)
      return { database, settings: maskAuthSettings(tenant.auth) }
    })

    scope.patch('/auth-settings', async (req, reply) => {
      const { database } = panelContext(req)
      const r = await change(req, reply, 'auth-settings', async (current) => {
        const auth = applyAuthSettingsPatch(current.auth, req.body)
        await checkProviderUrls(req.body, auth, { allowHosts: deps.config.outbound.allow_hosts })
        return { ...current, auth }
      })
      return { database, settings: maskAuthSettings(r.tenant.auth) }
    })

    // ---- GET / PATCH rest-settings ---------------------------------------------------------
    scope.get('/rest-settings', async (req, reply) => {
      const { tenant, database } = panelContext(req)
      await tagged(reply, database)
      return { database, settings: restSettingsView(tenant.rest) }
    })

    scope.patch('/rest-settings', async (req, reply) => {
      const { database } = panelContext(req)
      const r = await change(req, reply, 'rest-settings', (current) => ({ ...current, rest: applyRestSettingsPatch(current.rest, req.body) }))
      return { database, settings: restSettingsView(r.tenant.rest) }
    })

    // ---- signing keys: GET, POST rotate, DELETE legacy, DELETE :kid (revoke) ----------------
    scope.get('/signing-keys', async (req, reply) => {
      const { tenant, database } = panelContext(req)
      await tagged(reply, database)
      return { database, ...signingKeysView(tenant) }
    })

    scope.post('/signing-keys/rotate', async (req, reply) => {
      const { database } = panelContext(req)
      let kid = ''
      const r = await change(req, reply, 'rotate', async (current) => {
        const rotated = await rotatedJwt(current, req.body)
        kid = rotated.kid
        return { ...current, jwt: rotated.jwt }
      })
      return { database, rotated: kid, ...signingKeysView(r.tenant) }
    })

    scope.delete('/signing-keys/legacy', async (req, reply) => {
      const { database, session } = panelContext(req)
      const r = await change(req, reply, 'retire-legacy', (current) => ({ ...current, jwt: retiredLegacyJwt(current, session.userId) }))
      return { database, legacy_secret_retired: r.tenant.jwt.legacy_secret_retired, ...signingKeysView(r.tenant) }
    })

    scope.delete<{ Params: { kid: string } }>('/signing-keys/:kid', async (req, reply) => {
      const { database, session } = panelContext(req)
      const kid = req.params.kid
      const r = await change(req, reply, 'revoke', (current) => ({ ...current, jwt: revokedJwt(current, database, kid, session.userId) }))
      return { database, revoked: kid, ...signingKeysView(r.tenant) }
    })

    // ---- GET history: the audit trail of control-plane changes ------------------------------
    scope.get('/history', async (req) => {
      const { database } = panelContext(req)
      const store = deps.store
      if (store === undefined) throw new SettingsReadOnlyError()
      return { database, entries: await store.history(database) }
    })

    // ---- GET policy-check ------------------------------------------------------------------
    scope.get('/policy-check', async (req) => {
      const { tenant, database } = panelContext(req)
      try {
        const policies = await checkPolicies(deps.ownerPools.get(database, tenant.postgres), tenant)
        return { database, count: policies.length, policies }
      } catch (err) {
        throw new DatabaseUnavailableError({ cause: err, internal: err })
      }
    })

    // ---- GET types/typescript: the database's generated types (Supabase Management API's
    // `GET /v1/projects/{ref}/types/typescript?included_schemas=`: `{ types }`) ----------------
    scope.get<{ Querystring: { included_schemas?: string | string[] } }>('/types/typescript', async (req) => {
      const { tenant, database } = panelContext(req)
      const asked = req.query.included_schemas
      const schemas = parseSchemaList(asked === undefined ? [] : Array.isArray(asked) ? asked : [asked])
      let client
      try {
        client = await deps.ownerPools.get(database, tenant.postgres).connect()
      } catch (err) {
        throw new DatabaseUnavailableError({ cause: err, internal: err })
      }
      try {
        return { types: await generateTypescriptTypes(client, { schemas: schemas.length > 0 ? schemas : tenant.rest.schemas }) }
      } catch (err) {
        throw new DatabaseUnavailableError({ cause: err, internal: err })
      } finally {
        client.release()
      }
    })
  }
}
