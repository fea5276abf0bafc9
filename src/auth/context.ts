// Per-tenant resources of the auth engine: a pg pool per tenant on the tenant's `_authn`
// login (tenant.engines.auth), replaced when the URL changes, and the TenantContext a
// handler receives. The registry is owned by one engine (or service) and closed with it.
import type pg from 'pg'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config/index.js'
import { createPool } from '../shared/pg.js'
import { tenantIssuer, type Tenant } from '../tenants/schema.js'
import { unexpectedFailure } from './errors.js'
import type { Mailer } from './mail/index.js'
import type { RateLimits } from './rate-limits.js'
import type { TenantContext } from './types.js'

export class PoolRegistry {
  readonly #pools = new Map<string, { url: string, pool: pg.Pool }>()
  readonly #max: number
  readonly #allowExitOnIdle: boolean

  constructor (opts: { max: number, allowExitOnIdle?: boolean }) {
    this.#max = opts.max
    this.#allowExitOnIdle = opts.allowExitOnIdle ?? false
  }

  /** The pool of a tenant; a changed engines.auth URL gets a new pool (the old one drains). */
  get (tenant: Tenant): pg.Pool {
    const url = tenant.engines?.auth
    if (!url) throw unexpectedFailure(new Error(`tenant ${tenant.database} has no engines.auth connection`))
    const entry = this.#pools.get(tenant.database)
    if (entry && entry.url === url) return entry.pool
    if (entry) void entry.pool.end().catch(() => {})
    const pool = createPool(url, { max: this.#max, application_name: 'gatehouse-auth' })
    if (this.#allowExitOnIdle) (pool.options as { allowExitOnIdle?: boolean }).allowExitOnIdle = true
    this.#pools.set(tenant.database, { url, pool })
    return pool
  }

  async close (): Promise<void> {
    const pools = [...this.#pools.values()]
    this.#pools.clear()
    await Promise.all(pools.map((p) => p.pool.end().catch(() => {})))
  }
}

export interface ContextDeps {
  config: Config
  pools: PoolRegistry
  mailer: Mailer
  rateLimits: RateLimits
  now: () => Date
}

/** Public base of a tenant's auth API as clients reach it through the gateway. */
export function tenantExternalUrl (tenant: Tenant, publicUrl: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/${tenant.database}/auth/v1`
}

export function buildTenantContext (deps: ContextDeps, tenant: Tenant, log: FastifyBaseLogger): TenantContext {
  return {
    tenant,
    db: deps.pools.get(tenant),
    issuer: tenantIssuer(tenant, deps.config.public_url),
    externalUrl: tenantExternalUrl(tenant, deps.config.public_url),
    config: deps.config,
    mailer: deps.mailer,
    rateLimits: deps.rateLimits,
    log,
    now: deps.now
  }
}
