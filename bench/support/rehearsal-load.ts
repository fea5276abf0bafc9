// The steady mixed load of `npm run rehearse` (bench/rehearse.ts) and what it is judged by:
// per tenant one client reading, inserting (each acknowledged id remembered), signing in and
// refreshing through the gateway, and one panel client changing each tenant's site_url (each
// acknowledged value remembered). Every request is recorded (time, kind, tenant, outcome) for
// the per-event figures and the chart. Loops are bounded by the stop flag and a count.
import http from 'node:http'

export interface RehearsalTenant {
  database: string
  organization: string
  /** a or b: the Postgres cluster it lives on. */
  cluster: string
  publicKey: string
  ownerUrl: string
  email: string
  password: string
}

export interface Sample {
  /** ms since the load started. */
  at: number
  ms: number
  kind: 'read' | 'write' | 'sign-in' | 'refresh' | 'panel'
  cluster: string
  ok: boolean
  /** Status, or the transport error. */
  outcome: string
}

export interface LoadResult {
  samples: Sample[]
  /** Acknowledged inserts per database. */
  written: Map<string, number[]>
  /** Per database: the last acknowledged site_url and those sent after it (unacknowledged). */
  panel: Map<string, { acked: string | null; after: string[] }>
}

interface Answer {
  status: number
  body: unknown
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })

/** One request on kept-alive sockets; rejects on a transport error or after 10 s. */
function request(url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(
      url,
      { method, agent, headers: { ...headers, ...(data ? { 'content-type': 'application/json' } : {}) } },
      (res) => {
        let text = ''
        res.setEncoding('utf8').on('data', (c: string) => (text += c))
        res.on('end', () => {
          let parsed: unknown
          try {
            parsed = text === '' ? null : JSON.parse(text)
          } catch {
            parsed = text
          }
          resolve({ status: res.statusCode ?? 0, body: parsed })
        })
        res.on('error', reject)
      },
    )
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')))
    req.on('error', reject)
    req.end(data)
  })
}

export class Load {
  readonly result: LoadResult = { samples: [], written: new Map(), panel: new Map() }
  readonly #start = performance.now()
  #running = true
  #runs: Array<Promise<void>> = []

  constructor(
    private readonly gateway: string,
    private readonly panelUrl: string,
    private readonly panelSession: string,
  ) {}

  now(): number {
    return performance.now() - this.#start
  }

  start(tenants: RehearsalTenant[]): void {
    for (const x of tenants) {
      this.result.written.set(x.database, [])
      this.result.panel.set(x.database, { acked: null, after: [] })
      this.#runs.push(this.#client(x), this.#panelClient(x))
    }
  }

  async stop(): Promise<void> {
    this.#running = false
    await Promise.all(this.#runs)
    agent.destroy()
  }

  async #timed(
    kind: Sample['kind'],
    x: RehearsalTenant,
    ok: (a: Answer) => boolean,
    fn: () => Promise<Answer>,
  ): Promise<Answer | null> {
    const t0 = this.now()
    try {
      const a = await fn()
      const good = ok(a)
      const body = a.body as { code?: unknown; error_code?: unknown } | null
      const outcome = good ? String(a.status) : `${a.status} ${String(body?.error_code ?? body?.code ?? '')}`.trim()
      this.result.samples.push({ at: t0, ms: this.now() - t0, kind, cluster: x.cluster, ok: good, outcome })
      return good ? a : null
    } catch (err) {
      const outcome = (err as Error).message
      this.result.samples.push({ at: t0, ms: this.now() - t0, kind, cluster: x.cluster, ok: false, outcome })
      return null
    }
  }

  /** Reads, inserts, sign-ins and refreshes of one tenant, one after another. */
  async #client(x: RehearsalTenant): Promise<void> {
    const base = `${this.gateway}/${x.database}`
    const key = { apikey: x.publicKey }
    let refresh: string | null = null
    let id = 0
    for (let i = 0; this.#running && i < 1_000_000; i++) {
      await this.#timed(
        'read',
        x,
        (a) => a.status === 200,
        () => request(`${base}/rest/v1/items?select=id&limit=5`, 'GET', key),
      )
      const n = ++id
      const w = await this.#timed(
        'write',
        x,
        (a) => a.status === 201,
        () => request(`${base}/rest/v1/items`, 'POST', { ...key, prefer: 'return=minimal' }, { id: n }),
      )
      if (w !== null) this.result.written.get(x.database)!.push(n)
      if (i % 4 === 0) {
        const s = await this.#timed(
          'sign-in',
          x,
          (a) => a.status === 200,
          () =>
            request(`${base}/auth/v1/token?grant_type=password`, 'POST', key, { email: x.email, password: x.password }),
        )
        if (s !== null) refresh = (s.body as { refresh_token: string }).refresh_token
      } else if (refresh !== null) {
        const token = refresh
        const r = await this.#timed(
          'refresh',
          x,
          (a) => a.status === 200,
          () => request(`${base}/auth/v1/token?grant_type=refresh_token`, 'POST', key, { refresh_token: token }),
        )
        refresh = r !== null ? (r.body as { refresh_token: string }).refresh_token : null
      }
    }
  }

  /** The panel changing the tenant's site_url, one change after another (a few a second). */
  async #panelClient(x: RehearsalTenant): Promise<void> {
    const url = `${this.panelUrl}/organizations/${x.organization}/databases/${x.database}/api/auth-settings`
    const state = this.result.panel.get(x.database)!
    const headers = { authorization: `Bearer ${this.panelSession}` }
    for (let i = 0; this.#running && i < 100_000; i++) {
      const value = `http://app.example/${i}`
      state.after.push(value)
      const a = await this.#timed(
        'panel',
        x,
        (r) => r.status === 200,
        () => request(url, 'PATCH', headers, { site_url: value }),
      )
      if (a !== null) state.acked = value
      if (a !== null) state.after = []
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  }
}
