// Process configuration: schema, loader, dump.
export { type Config } from './schema.js'
export { loadConfig, type LoadConfigOptions } from './load.js'
export { dumpConfig } from './dump.js'
export { unknownEnvironment, configEnvNames, configEnvEntries } from './env-check.js'
export { tenantFileEnvironment } from './environment.js'
