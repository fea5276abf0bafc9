// Per-tenant resources of the auth engine: connections of each tenant's `_authn` login
// (tenant.engines.auth) from the shared per-tenant pools (one budget for the engine,
// a per-tenant cap, fair shares, idle pools closed, a bounded number of tenants), and
// the TenantContext a handler receives. The registry is owned by one engine (or
// service) and closed with it.
import type { FastifyBaseLogger } from 'fastify'
import { AUTH_CONSTANTS, TENANT_CONNECT_TIMEOUT_MS, type Config } from '../config/index.js'
import {
  budgetOptions,
  GuardedClient,
  TenantPools,
  TenantPoolTimeoutError,
  type PoolLike,
  type TenantPoolsSnapshot,
} from '../shared/index.js'
import { tenantIssuer, type Tenant } from '../tenants/index.js'
import { databaseUnavailable, unexpectedFailure } from './errors.js'
import type { Mailer } from './mail/index.js'
import type { RateLimits } from './rate-limits.js'
import type { TenantContext } from './types.js'

interface PoolRegistryOptions {
  /** Connections one tenant may hold. */
  max: number
  /**
   * Connections for all tenants together; 0: clusterShare of the cluster's
   * (docs/operating.md "Sizing for many tenants").
   */
  budget: number
  /** The cluster's share of a budget of 0 (auth.pool_cluster_share). */
  clusterShare: number
  /** Tenant pools kept at most (default AUTH_CONSTANTS.defaultPoolMaxTenants). */
  maxTenants?: number
  /** Idle connections do not keep the process alive. */
  allowExitOnIdle?: boolean
  /** A new connection's timeout (default TENANT_CONNECT_TIMEOUT_MS, as REST's). */
  connectTimeoutMs?: number
}

export class PoolRegistry {
  readonly #pools: TenantPools

  constructor(opts: PoolRegistryOptions) {
    this.#pools = new TenantPools({
      ...budgetOptions(opts.budget, opts.clusterShare),
      perTenant: opts.max,
      idleMs: AUTH_CONSTANTS.poolIdleMs,
      acquireTimeoutMs: AUTH_CONSTANTS.poolAcquireTimeoutMs,
      connectTimeoutMs: opts.connectTimeoutMs ?? TENANT_CONNECT_TIMEOUT_MS,
      maxTenants: opts.maxTenants ?? AUTH_CONSTANTS.defaultPoolMaxTenants,
      applicationName: 'gatehouse-auth',
      // A wait for a connection that timed out answers like an unreachable database (503).
      timeoutError: (key) => databaseUnavailable(new TenantPoolTimeoutError(key)),
      allowExitOnIdle: opts.allowExitOnIdle,
      // Owner triggers on auth tables run in the engine's statements (docs/security.md).
      createClient: (config) => new GuardedClient(config),
      reusable: (client) => !(client as GuardedClient).tainted,
    })
  }

  /** The pool of a tenant; a changed engines.auth URL retires the old URL's connections. */
  get(tenant: Tenant): PoolLike {
    const url = tenant.engines?.auth
    if (!url) throw unexpectedFailure(new Error(`tenant ${tenant.database} has no engines.auth connection`))
    return this.#pools.pool(tenant.database, url)
  }

  /** Every tenant's pool numbers (metrics). */
  snapshot(): TenantPoolsSnapshot {
    return this.#pools.snapshot()
  }

  async close(): Promise<void> {
    await this.#pools.close()
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
function tenantExternalUrl(tenant: Tenant, publicUrl: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/${tenant.database}/auth/v1`
}

export function buildTenantContext(deps: ContextDeps, tenant: Tenant, log: FastifyBaseLogger): TenantContext {
  return {
    tenant,
    db: deps.pools.get(tenant),
    issuer: tenantIssuer(tenant, deps.config.public_url),
    externalUrl: tenantExternalUrl(tenant, deps.config.public_url),
    config: deps.config,
    mailer: deps.mailer,
    rateLimits: deps.rateLimits,
    log,
    now: deps.now,
  }
}
