// What the panel's route handlers work with (built once by index.ts) and their shape.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../config/index.js'
import type { AuthService } from '../auth/index.js'
import type { RefusalExplainer } from '../gateway/index.js'
import type { TenantStore } from '../tenants/index.js'
import type { SidePools } from '../shared/index.js'
import type { ExchangeLimiter } from './exchange-limit.js'

export interface PanelRouteDeps {
  config: Config
  store?: TenantStore
  auth: AuthService
  explainer: RefusalExplainer
  /** Pools on the tenants' REST engine logins (test queries). */
  restPools: SidePools
  /** Pools on the tenants' owner connections (policy check). */
  ownerPools: SidePools
  /** The exchange's sign-in limit per database and panel user. */
  exchangeLimiter: ExchangeLimiter
}

export type PanelHandler = (deps: PanelRouteDeps, req: FastifyRequest, reply: FastifyReply) => Promise<unknown>
