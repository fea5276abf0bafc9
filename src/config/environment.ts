// The process environment is read in config/ only: GATEHOUSE_* settings (loadConfig, from the
// environment its caller passes) and the values of `${VAR}` references in tenant files.

/** Where `${VAR}` in a tenant file takes its value when the caller gives no environment: this process's. */
export function tenantFileEnvironment(): NodeJS.ProcessEnv {
  return process.env
}
