// The process configuration schema (TypeBox) with its defaults. One section per part;
// each part's build*() takes its own section. Env names: GATEHOUSE_ + upper snake of the
// key path (GATEHOUSE_GATEWAY_PORT, GATEHOUSE_REST_POOL_BUDGET, ...).
import { Type, type Static } from '@sinclair/typebox'

const Listen = (port: number, adminPort: number) => ({
  host: Type.String({ default: '127.0.0.1' }),
  port: Type.Integer({ minimum: 0, maximum: 65535, default: port }),
  /**
   * The admin listener (/healthz, /readyz, /metrics; never on the public port). Loopback by
   * default: scrapers and probes reach it from the same host or pod.
   */
  admin_host: Type.String({ default: '127.0.0.1' }),
  admin_port: Type.Integer({ minimum: 0, maximum: 65535, default: adminPort }),
})

export const ConfigSchema = Type.Object(
  {
    /** Public base URL of the gateway ({base_url}); tokens' `iss` derive from it. */
    public_url: Type.String({ default: 'http://127.0.0.1:8000' }),
    log: Type.Object(
      {
        level: Type.Union(
          [
            Type.Literal('fatal'),
            Type.Literal('error'),
            Type.Literal('warn'),
            Type.Literal('info'),
            Type.Literal('debug'),
            Type.Literal('trace'),
            Type.Literal('silent'),
          ],
          { default: 'info' },
        ),
      },
      { default: {}, additionalProperties: false },
    ),
    tracing: Type.Object(
      {
        /**
         * OTLP/HTTP base URL (spans go to <url>/v1/traces); tracing is off when unset. The
         * standard OTEL_EXPORTER_OTLP_ENDPOINT sets it too.
         */
        otlp_endpoint: Type.Optional(Type.String({ minLength: 1 })),
        /**
         * The spans' service.name (default `gatehouse-<part>`); the standard OTEL_SERVICE_NAME
         * sets it too and wins over a service.name in resource_attributes, as OpenTelemetry says.
         */
        service_name: Type.Optional(Type.String({ minLength: 1 })),
        /**
         * More resource attributes of the spans, `key=value,key2=value2` with values
         * percent-encoded (the format of the standard OTEL_RESOURCE_ATTRIBUTES, which sets it too).
         */
        resource_attributes: Type.Optional(Type.String()),
      },
      { default: {}, additionalProperties: false },
    ),
    metrics: Type.Object(
      {
        /**
         * Label per-request metrics with the tenant database (a series per database). Off for
         * very many databases: the series are then per part and status only.
         */
        tenant_label: Type.Boolean({ default: true }),
      },
      { default: {}, additionalProperties: false },
    ),
    tenants: Type.Object(
      {
        /** `files`: YAML files in memory (embedded default); `redis`: the Redis store. */
        source: Type.Union([Type.Literal('files'), Type.Literal('redis')], { default: 'files' }),
        dir: Type.String({ default: 'config/tenants' }),
        /** files source: where the audit trail and the revocations of control-plane changes are kept (docs/tenant-state.md). */
        state_dir: Type.String({ default: '.gatehouse' }),
        /** TTL backstop of the per-process tenant cache. */
        cache_ttl_seconds: Type.Integer({ minimum: 1, default: 60 }),
        /** How long an unknown database is remembered as unknown. */
        negative_ttl_seconds: Type.Integer({ minimum: 0, default: 5 }),
        /** Delay of the second invalidation after a change (beats an in-flight reload); 0 disables it. */
        reinvalidate_ms: Type.Integer({ minimum: 0, default: 500 }),
        cache_max: Type.Integer({ minimum: 1, default: 10_000 }),
      },
      { default: {}, additionalProperties: false },
    ),
    redis: Type.Object(
      {
        url: Type.Optional(Type.String()),
        key_prefix: Type.String({ default: 'gatehouse:' }),
        /**
         * Redis Sentinel: the sentinels and the master's name (instead of url, which becomes
         * `redis+sentinel://h1:p1,h2:p2/<name>`); clients follow a failover.
         */
        sentinels: Type.Optional(
          Type.Array(
            Type.Object({ host: Type.String({ minLength: 1 }), port: Type.Integer({ minimum: 1, maximum: 65535 }) }),
            {
              minItems: 1,
            },
          ),
        ),
        name: Type.Optional(Type.String({ minLength: 1 })),
        /**
         * Replicas that must hold a control-plane write (tenant records) before it is acknowledged
         * (Redis WAIT); otherwise the write is undone and the caller gets 503. 0: no wait.
         */
        write_replicas: Type.Integer({ minimum: 0, default: 0 }),
        write_replicas_timeout_ms: Type.Integer({ minimum: 1, default: 1_000 }),
      },
      { default: {}, additionalProperties: false },
    ),
    postgres: Type.Object(
      {
        /** Admin connection of the cluster new tenants are created on. */
        url: Type.Optional(Type.String()),
        /**
         * CONNECTION LIMIT of each database's owner login (and of each of its test-query logins),
         * set when a database is provisioned or migrated; 0: min(20, max_connections / 10).
         */
        owner_connection_limit: Type.Integer({ minimum: 0, default: 0 }),
        /** CONNECTION LIMIT of each database's engine logins (REST, auth); 0: max_connections / 4. */
        engine_connection_limit: Type.Integer({ minimum: 0, default: 0 }),
      },
      { default: {}, additionalProperties: false },
    ),
    gateway: Type.Object(
      {
        ...Listen(8000, 9100),
        upstream_timeout_ms: Type.Integer({ minimum: 1, default: 30_000 }),
        upstream_connect_timeout_ms: Type.Integer({ minimum: 1, default: 5_000 }),
        /** Keep-alive idle timeout of upstream sockets; shorter than the upstream's. */
        upstream_keepalive_ms: Type.Integer({ minimum: 1, default: 4_000 }),
        upstream_token_ttl_seconds: Type.Integer({ minimum: 10, default: 300 }),
        max_error_body_bytes: Type.Integer({ minimum: 1024, default: 65_536 }),
        /** Sockets per upstream origin, shared by every tenant on it. */
        upstream_max_sockets: Type.Integer({ minimum: 1, default: 512 }),
        /** Longest wait for an upstream socket when all are busy: 503 upstream_busy. */
        upstream_queue_timeout_ms: Type.Integer({ minimum: 1, default: 5_000 }),
        /** Requests one tenant may have in flight to its upstreams: 429 too_many_concurrent_requests. */
        tenant_max_inflight: Type.Integer({ minimum: 1, default: 100 }),
        /** REST bodies larger (a tenant's rest.max_body_bytes wins): 413 payload_too_large. */
        rest_max_body_bytes: Type.Integer({ minimum: 1024, default: 1_048_576 }),
        /** Auth bodies larger: 413 payload_too_large. */
        auth_max_body_bytes: Type.Integer({ minimum: 1024, default: 65_536 }),
        /** A request body pausing longer: 408 request_timeout. */
        body_idle_timeout_ms: Type.Integer({ minimum: 1, default: 10_000 }),
        /** A request body taking longer in all: 408 request_timeout. */
        body_timeout_ms: Type.Integer({ minimum: 1, default: 60_000 }),
        /**
         * Bytes of a request body read before the request takes a tenant's in-flight slot or an
         * upstream socket (nginx's proxy_request_buffering, Kong's request_buffering): a slow
         * upload holds neither while it arrives. A larger body streams once this much is read.
         */
        buffer_body_bytes: Type.Integer({ minimum: 0, default: 1_048_576 }),
        /**
         * A request body must arrive at least this fast, measured over each body_rate_window_ms
         * (a streamed body is not judged while the upstream holds it back): slower is 408
         * request_timeout, the upstream request cut. 0: no minimum.
         */
        min_body_bytes_per_second: Type.Integer({ minimum: 0, default: 1024 }),
        body_rate_window_ms: Type.Integer({ minimum: 10, default: 10_000 }),
        /**
         * The share of gateway.tenant_max_inflight one client (its address and the kind of API
         * key it sends) may hold: beyond it that client gets 429 client_too_many_concurrent_requests.
         */
        client_max_inflight_share: Type.Number({ exclusiveMinimum: 0, maximum: 1, default: 0.25 }),
        /**
         * Bytes of an upstream response the gateway holds for a client that reads slower than
         * the upstream answers: within it the upstream request completes (and gives its slot
         * back) whatever the client does; beyond it the upstream is held back.
         */
        response_buffer_bytes: Type.Integer({ minimum: 0, default: 1_048_576 }),
        /** A client that takes none of its response for this long is disconnected (nginx's send_timeout). */
        send_timeout_ms: Type.Integer({ minimum: 1, default: 10_000 }),
        cors_origins: Type.Array(Type.String(), { default: ['*'] }),
        /**
         * Addresses (IPs, CIDRs, `loopback`, `linklocal`, `uniquelocal`) of proxies in front of
         * the gateway whose X-Forwarded-For names the client; by default none (the socket's
         * address is the client). The gateway sends engines exactly one X-Forwarded-For entry.
         */
        trusted_proxies: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
        shutdown_grace_ms: Type.Integer({ minimum: 0, default: 10_000 }),
      },
      { default: {}, additionalProperties: false },
    ),
    rest: Type.Object(
      {
        ...Listen(3000, 9101),
        /**
         * Connections for all tenants together in this process; 0: pool_cluster_share of what
         * the cluster takes from non-superusers (max_connections - superuser_reserved_connections),
         * read on the first connection (docs/operating.md "Sizing for many tenants").
         */
        pool_budget: Type.Integer({ minimum: 0, default: 0 }),
        /** The cluster's share all REST processes together take when pool_budget is 0 (split among `--workers`). */
        pool_cluster_share: Type.Number({ exclusiveMinimum: 0, maximum: 1, default: 0.5 }),
        /** Connections one tenant may hold at most. */
        pool_per_tenant: Type.Integer({ minimum: 1, default: 10 }),
        pool_idle_ms: Type.Integer({ minimum: 1000, default: 60_000 }),
        /** Tenant pools kept open at most (the least recently used idle one is closed). */
        pool_max_tenants: Type.Integer({ minimum: 1, default: 1000 }),
        max_body_bytes: Type.Integer({ minimum: 1024, default: 1_048_576 }),
        /** After a failed connect to a tenant database, requests fail fast (503) this long before one retries; doubles per failure. */
        reconnect_backoff_ms: Type.Integer({ minimum: 1, default: 1_000 }),
        /** Longest wait between reconnects to a database that stays unreachable. */
        reconnect_backoff_max_ms: Type.Integer({ minimum: 1, default: 32_000 }),
        /** JSON bodies nested deeper (arrays and objects) are refused with 400 PGRST102. */
        max_json_depth: Type.Integer({ minimum: 1, default: 100 }),
        statement_timeout_ms: Type.Integer({ minimum: 0, default: 30_000 }),
      },
      { default: {}, additionalProperties: false },
    ),
    auth: Type.Object(
      {
        ...Listen(9999, 9102),
        pool_per_tenant: Type.Integer({ minimum: 1, default: 5 }),
        /** Connections for all tenants together in this process; 0: pool_cluster_share of the cluster's. */
        pool_budget: Type.Integer({ minimum: 0, default: 0 }),
        /** The cluster's share all auth processes together take when pool_budget is 0 (split among `--workers`). */
        pool_cluster_share: Type.Number({ exclusiveMinimum: 0, maximum: 1, default: 0.25 }),
        /** Tenant pools kept open at most (the least recently used idle one is closed). */
        pool_max_tenants: Type.Integer({ minimum: 1, default: 1000 }),
        bcrypt_cost: Type.Integer({ minimum: 4, maximum: 15, default: 10 }),
        /** How long a Postgres function hook may run before it is cancelled (GoTrue: 2 s). */
        hook_function_timeout_ms: Type.Integer({ minimum: 10, maximum: 60_000, default: 2_000 }),
        /** bcrypt computations running at once in a process (others queue); 0 = the cores less one. */
        hash_concurrency: Type.Integer({ minimum: 0, default: 0 }),
        /**
         * Sessions whose last refresh a process remembers (about 2 KB each), so their next
         * refresh is the short statement (docs/auth-protocol.md §5.3); 0 = none.
         */
        remembered_sessions: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 10_000 }),
        /** Deepest nesting of objects/arrays a JSON body may have (user_metadata, data ...); deeper is 400. */
        max_json_depth: Type.Integer({ minimum: 2, maximum: 10_000, default: 100 }),
        /**
         * Addresses (IPs, CIDRs, `loopback`, `linklocal`, `uniquelocal`) whose X-Forwarded-For
         * the engine believes for the client IP of rate limits and sessions: the gateways in
         * front of it. Any other peer's header is ignored and its socket address is the client IP.
         */
        trusted_proxies: Type.Array(Type.String({ minLength: 1 }), { default: ['loopback'] }),
      },
      { default: {}, additionalProperties: false },
    ),
    panel: Type.Object(
      {
        ...Listen(8001, 9103),
        /** HS256 secret of panel sessions (development); or jwks_url for a real panel. */
        session_secret: Type.Optional(Type.String({ minLength: 32 })),
        jwks_url: Type.Optional(Type.String()),
        algorithms: Type.Array(Type.String(), { default: ['HS256'] }),
        issuer: Type.Optional(Type.String()),
        audience: Type.Optional(Type.String()),
        test_query_timeout_ms: Type.Integer({ minimum: 1, default: 5_000 }),
        test_query_max_rows: Type.Integer({ minimum: 1, default: 100 }),
        /** Bytes of result a test query may bring back from Postgres; more ends it (400). */
        test_query_max_bytes: Type.Integer({ minimum: 1024, default: 4 * 1024 * 1024 }),
      },
      { default: {}, additionalProperties: false },
    ),
    mail: Type.Object(
      {
        /** SMTP used when a tenant names none. */
        smtp_host: Type.String({ default: '127.0.0.1' }),
        smtp_port: Type.Integer({ default: 1025 }),
        web_port: Type.Integer({ default: 1080 }),
      },
      { default: {}, additionalProperties: false },
    ),
    outbound: Type.Object(
      {
        /**
         * Hosts (name or IP literal, optionally `host:port`) that requests to identity providers
         * may reach over http and at loopback, private, link-local or metadata addresses. Every
         * other provider URL must be https and resolve to public addresses only.
         */
        allow_hosts: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
      },
      { default: {}, additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

export type Config = Static<typeof ConfigSchema>
