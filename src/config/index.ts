// Process configuration: schema, loader, dump.
export { ConfigSchema, type Config } from './schema.js'
export { loadConfig, type LoadConfigOptions } from './load.js'
export { dumpConfig } from './dump.js'
export { unknownEnvironment, nearestEnvName, configEnvNames, configEnvEntries } from './env-check.js'
export { tenantFileEnvironment } from './environment.js'
