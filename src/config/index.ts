// Process configuration: schema, loader, dump.
export { type Config } from './schema.js'
export { loadConfig, mergeDeep, type LoadConfigOptions } from './load.js'
export { dumpConfig } from './dump.js'
export { AUTH_CONSTANTS, PANEL_CONSTANTS, TENANT_CONNECT_TIMEOUT_MS } from './constants.js'
export { unknownEnvironment, configEnvNames, configEnvEntries } from './env-check.js'
export { tenantFileEnvironment } from './environment.js'
