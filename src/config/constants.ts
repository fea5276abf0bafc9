// Fixed numbers of the parts that are not settings (no YAML key, no GATEHOUSE_* variable),
// kept here with their reasons so each is chosen in one place. A number that operators need
// to change becomes a setting in schema.ts instead.

/**
 * A new connection to a tenant database may take this long, then its requests answer 503 (the REST
 * and auth engines alike); a failure of the cluster's refuses its other tenants at once from then
 * on (docs/operating.md, "Clusters").
 */
export const TENANT_CONNECT_TIMEOUT_MS = 5_000

/** The auth engine (src/auth). */
export const AUTH_CONSTANTS = Object.freeze({
  /** The largest request body read, as GoTrue's default (1 MiB); larger is 413. */
  bodyLimitBytes: 1024 * 1024,
  /** A tenant's idle connection is closed after this long. */
  poolIdleMs: 30_000,
  /** A request waits this long for a free connection of its tenant, then answers 503. */
  poolAcquireTimeoutMs: 10_000,
  /** Tenant pools kept when a caller names no bound (auth.pool_max_tenants's default). */
  defaultPoolMaxTenants: 1000,
})

/** The control-panel API (src/panel). */
export const PANEL_CONSTANTS = Object.freeze({
  /** The largest request body read; larger is 413 payload_too_large. */
  bodyLimitBytes: 1024 * 1024,
  /** Side pools (one per database and connection URL) kept at most; the least recently used goes. */
  sidePoolsMax: 50,
  /** Connections of one side pool: test queries and policy checks are occasional. */
  sidePoolSize: 2,
  /** A side pool's connection attempt may take this long. */
  sidePoolTimeoutMs: 5_000,
})
