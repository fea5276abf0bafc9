// The shared library of the parts: errors, HTTP and JWT helpers, logging, Postgres helpers,
// the per-tenant connection pools, the role vocabulary, own-key look-ups and outbound requests.
// Other parts import shared code from here only.
export * from './errors.js'
export * from './http.js'
export * from './jwt.js'
export * from './logger.js'
export * from './pg.js'
export * from './tenant-pools.js'
export * from './side-pools.js'
export * from './pool-metrics.js'
export * from './app.js'
export * from './admin.js'
export * from './tracing.js'
export * from './roles.js'
export * from './own.js'
export * from './fastify-errors.js'
export * from './outbound.js'
export * from './version.js'
