// The panel's database routes under /organizations/:org/databases/:db/api: the app-session
// exchange, the test query, the auth and REST settings and the policy check. Each handler reads the
// guarded context (context.ts) and answers JSON; errors are thrown and rendered by index.ts.
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config/index.js'
import type { AuthService } from '../auth/index.js'
import type { RefusalExplainer } from '../gateway/index.js'
import type { TenantStore } from '../tenants/index.js'
import { isGatehouseError } from '../shared/index.js'
import { applyAuthSettingsPatch, checkProviderUrls, maskAuthSettings } from './auth-settings.js'
import { applyRestSettingsPatch, restSettingsView } from './rest-settings.js'
import { revokedJwt, rotatedJwt, signingKeysView } from './signing-keys.js'
import { panelContext } from './context.js'
import {
  AccountLinkRefusedError, DatabaseNotFoundError, DatabaseUnavailableError, EngineNotConfiguredError, QueryError, ResultTooLargeError, QueryTimeoutError, SettingsReadOnlyError, TestQueryLoginError
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

/** The documented lifetime of an exchanged access token (service.md, Limits). */
export const EXCHANGE_EXPIRES_IN = 3600

/** Errors of the connection itself (not of a statement) are a 503. */
function connectionFailure (err: unknown): boolean {
  if (isServerError(err)) return err.code.startsWith('08') || err.code === '57P01' || err.code === '53300' || err.code === '28P01' || err.code === '3D000'
  const code = (err as { code?: unknown })?.code
  const msg = String((err as { message?: unknown })?.message ?? '')
  return typeof code === 'string' ? /^E[A-Z]+/.test(code) : /timeout|terminated|Connection/i.test(msg)
}

export function panelRoutes (deps: PanelRouteDeps) {
  return async function routes (scope: FastifyInstance): Promise<void> {
    // ---- POST app-session: the panel session for a database session -----------------------
    scope.post('/app-session', async (req) => {
      const { tenant, session, database } = panelContext(req)
      if (!tenant.engines?.auth) throw new EngineNotConfiguredError(database, 'auth engine')
      await deps.exchangeLimiter.consume(tenant, session.userId)
      // The exchange's access token lives 3600 s whatever the tenant's own expiry (service.md).
      const t = tenant.jwt.expiry === EXCHANGE_EXPIRES_IN ? tenant : { ...tenant, jwt: { ...tenant.jwt, expiry: EXCHANGE_EXPIRES_IN } }
      // Never hand a member an account the exchange did not establish as theirs: link only to
      // a user that already has this panel identity, or whose address was proven by a mail
      // round trip (a stranger may have signed up with the member's address, unconfirmed).
      let r: Awaited<ReturnType<AuthService['findOrCreateUserByIdentity']>>
      try {
        r = await deps.auth.findOrCreateUserByIdentity({
          tenant: t,
          provider: 'panel',
          providerId: session.userId,
          email: session.email,
          emailVerified: session.emailVerified,
          requireEmailProof: true
        })
      } catch (err) {
        if (isGatehouseError(err) && err.code === 'email_not_proven') {
          const email = session.email ?? ''
          throw new AccountLinkRefusedError(database, email, {
            cause: err,
            hint: `Prove the address once: in the app, sign in as ${email} through a mailed link (magic link, password ` +
              'recovery or sign-up confirmation) and follow it, then exchange again. Or, if that user is not yours, ' +
              'delete it (Admin API or DELETE FROM auth.users as the owner) and exchange again to get a new one.'
          })
        }
        throw err
      }
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

    // ---- GET / PATCH auth-settings ---------------------------------------------------------
    scope.get('/auth-settings', async (req) => {
      const { tenant, database } = panelContext(req)
      return { database, settings: maskAuthSettings(tenant.auth) }
    })

    scope.patch('/auth-settings', async (req) => {
      const { organization, database } = panelContext(req)
      const store = deps.store
      if (store === undefined) throw new SettingsReadOnlyError()
      // Read the record from the store itself (not a cached copy) right before writing.
      const current = await store.get(database)
      if (current === null || current.organization !== organization) throw new DatabaseNotFoundError(organization, database)
      const auth = applyAuthSettingsPatch(current.auth, req.body)
      await checkProviderUrls(req.body, auth, { allowHosts: deps.config.outbound.allow_hosts })
      await store.putAll([{ ...structuredClone(current), auth }])
      req.log.info({ database, fields: Object.keys(req.body as object) }, 'auth settings changed from the panel')
      return { database, settings: maskAuthSettings(auth) }
    })

    // ---- GET / PATCH rest-settings ---------------------------------------------------------
    scope.get('/rest-settings', async (req) => {
      const { tenant, database } = panelContext(req)
      return { database, settings: restSettingsView(tenant.rest) }
    })

    scope.patch('/rest-settings', async (req) => {
      const { organization, database } = panelContext(req)
      const store = deps.store
      if (store === undefined) throw new SettingsReadOnlyError()
      const current = await store.get(database)
      if (current === null || current.organization !== organization) throw new DatabaseNotFoundError(organization, database)
      const rest = applyRestSettingsPatch(current.rest, req.body)
      await store.putAll([{ ...structuredClone(current), rest }])
      req.log.info({ database, fields: Object.keys(req.body as object) }, 'REST settings changed from the panel')
      return { database, settings: restSettingsView(rest) }
    })

    // ---- signing keys: GET, POST rotate, DELETE :kid (revoke) -------------------------------
    scope.get('/signing-keys', async (req) => {
      const { tenant, database } = panelContext(req)
      return { database, ...signingKeysView(tenant) }
    })

    scope.post('/signing-keys/rotate', async (req) => {
      const { organization, database } = panelContext(req)
      const store = deps.store
      if (store === undefined) throw new SettingsReadOnlyError()
      const current = await store.get(database)
      if (current === null || current.organization !== organization) throw new DatabaseNotFoundError(organization, database)
      const { jwt, kid } = await rotatedJwt(current, req.body)
      const next = { ...structuredClone(current), jwt }
      await store.putAll([next])
      req.log.info({ database, kid }, 'signing key rotated from the panel')
      return { database, rotated: kid, ...signingKeysView(next) }
    })

    scope.delete<{ Params: { kid: string } }>('/signing-keys/:kid', async (req) => {
      const { organization, database } = panelContext(req)
      const store = deps.store
      if (store === undefined) throw new SettingsReadOnlyError()
      const current = await store.get(database)
      if (current === null || current.organization !== organization) throw new DatabaseNotFoundError(organization, database)
      const kid = req.params.kid
      const next = { ...structuredClone(current), jwt: revokedJwt(current, database, kid) }
      await store.putAll([next])
      req.log.info({ database, kid }, 'signing key revoked from the panel')
      return { database, revoked: kid, ...signingKeysView(next) }
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
