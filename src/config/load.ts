// loadConfig: defaults < YAML file < environment, validated once and frozen.
// Nothing outside config/ reads process.env for settings.
import { readFileSync } from 'node:fs'
import { parse as parseYaml } from 'yaml'
import { Ajv } from 'ajv'
import { ConfigSchema, type Config } from './schema.js'
import { ConfigError, deepFreeze, isPlainObject, readableSchemaErrors } from '../shared/index.js'

const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: 'array', strict: false })
const validate = ajv.compile(ConfigSchema)

type Json = Record<string, unknown>

/** `b` over `a`: objects merged key by key, any other value of `b` replacing `a`'s. */
export function mergeDeep(a: Json, b: Json): Json {
  const out: Json = { ...a }
  for (const [k, v] of Object.entries(b))
    out[k] = isPlainObject(v) && isPlainObject(out[k]) ? mergeDeep(out[k] as Json, v) : v
  return out
}

/** Env GATEHOUSE_<SECTION>_<KEY> -> { section: { key } } for keys the schema knows. */
function fromEnv(env: NodeJS.ProcessEnv): { data: Json; sources: Map<string, string> } {
  const data: Json = {}
  const sources = new Map<string, string>()
  const props = (ConfigSchema as unknown as { properties: Record<string, { properties?: Record<string, unknown> }> })
    .properties
  for (const [section, schema] of Object.entries(props)) {
    if (schema.properties) {
      for (const key of Object.keys(schema.properties)) {
        const name = `GATEHOUSE_${section}_${key}`.toUpperCase()
        const v = env[name]
        if (v === undefined) continue
        const target = (data[section] ??= {}) as Json
        target[key] = v.startsWith('[') ? safeJson(v) : v
        sources.set(`${section}.${key}`, name)
      }
    } else {
      const name = `GATEHOUSE_${section}`.toUpperCase()
      if (env[name] !== undefined) {
        data[section] = env[name]
        sources.set(section, name)
      }
    }
  }
  // Conventional names used by platforms and by `npm start`.
  if (env.REDIS_URL && !sources.has('redis.url')) {
    ;((data.redis ??= {}) as Json).url = env.REDIS_URL
    sources.set('redis.url', 'REDIS_URL')
  }
  if (env.OTEL_EXPORTER_OTLP_ENDPOINT && !sources.has('tracing.otlp_endpoint')) {
    ;((data.tracing ??= {}) as Json).otlp_endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT
    sources.set('tracing.otlp_endpoint', 'OTEL_EXPORTER_OTLP_ENDPOINT')
  }
  for (const [name, key] of [
    ['OTEL_SERVICE_NAME', 'service_name'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'resource_attributes'],
  ] as const) {
    if (env[name] && !sources.has(`tracing.${key}`)) {
      ;((data.tracing ??= {}) as Json)[key] = env[name]
      sources.set(`tracing.${key}`, name)
    }
  }
  if (env.DATABASE_URL && !sources.has('postgres.url')) {
    ;((data.postgres ??= {}) as Json).url = env.DATABASE_URL
    sources.set('postgres.url', 'DATABASE_URL')
  }
  return { data, sources }
}

function safeJson(v: string): unknown {
  try {
    return JSON.parse(v)
  } catch {
    return v
  }
}

export interface LoadConfigOptions {
  /** Path of a YAML config file. */
  file?: string
  env?: NodeJS.ProcessEnv
  /** Values that win over everything (CLI flags, tests). */
  overrides?: Json
  /** Values under the file and the environment (a running development stack's cluster). */
  defaults?: Json
}

export function loadConfig(opts: LoadConfigOptions = {}): Config {
  const env = opts.env ?? {}
  let fileData: Json = {}
  const file = opts.file ?? env.GATEHOUSE_CONFIG
  if (file) {
    try {
      fileData = (parseYaml(readFileSync(file, 'utf8')) ?? {}) as Json
    } catch (err) {
      throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`)
    }
    if (!isPlainObject(fileData)) throw new ConfigError(`config file ${file} must hold a mapping`)
  }
  const { data: envData, sources } = fromEnv(env)
  const data = mergeDeep(mergeDeep(mergeDeep(opts.defaults ?? {}, fileData), envData), opts.overrides ?? {})
  if (!validate(data)) {
    const fallback = file
      ? file
      : opts.defaults !== undefined
        ? 'defaults (and the running development stack)'
        : 'defaults'
    const problems = readableSchemaErrors(validate.errors ?? []).map((e) => {
      const p = e.instancePath.replace(/^\//, '').replace(/\//g, '.')
      const extra =
        e.keyword === 'additionalProperties'
          ? ` (${String((e.params as { additionalProperty: string }).additionalProperty)})`
          : ''
      return `${p || '(root)'}${extra}: ${e.message ?? 'invalid'} [from ${sources.get(p) ?? fallback}]`
    })
    throw new ConfigError('invalid configuration', problems)
  }
  const cfg = data as unknown as Config
  sentinelUrl(cfg.redis)
  if (cfg.tenants.source === 'redis' && !cfg.redis.url) {
    throw new ConfigError('invalid configuration', [
      'tenants.source is redis but redis.url is not set (GATEHOUSE_REDIS_URL or REDIS_URL)',
    ])
  }
  return deepFreeze(cfg)
}

/**
 * redis.sentinels + redis.name as the one URL every Redis client of the process reads
 * (`redis+sentinel://[:password@]h1:p1,h2:p2/<name>`, connectRedis); the password, if any, from
 * redis.url. Both forms at once must agree on nothing else: sentinels win.
 */
function sentinelUrl(redis: Config['redis']): void {
  const { sentinels, name } = redis
  if (sentinels === undefined && name === undefined) return
  if (sentinels === undefined || name === undefined)
    throw new ConfigError('invalid configuration', ['redis.sentinels and redis.name go together (Redis Sentinel)'])
  let password = ''
  if (redis.url !== undefined) {
    try {
      const u = new URL(redis.url)
      if (u.password) password = `:${u.password}@`
    } catch {
      // a unix socket path: no password to carry over
    }
  }
  const hosts = sentinels.map((s) => `${s.host.includes(':') ? `[${s.host}]` : s.host}:${s.port}`).join(',')
  ;(redis as { url?: string }).url = `redis+sentinel://${password}${hosts}/${encodeURIComponent(name)}`
}
