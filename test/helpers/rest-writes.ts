// Helpers of the write, RPC and OpenAPI tests (not a test file): the REST fixture of
// test/helpers/rest-fixture.ts plus tables and functions for writes, and one `call` that sends any
// method with a body through fastify inject, as a given role.
import { readFileSync } from 'node:fs'
import { createRestFixture, type FixtureOptions, type InjectResult, type RestFixture } from './rest-fixture.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** Tables for writes (run as the owner after the read fixture). anon may write all of them. */
export const WRITE_SQL = readFileSync(new URL('../fixtures/writes.sql', import.meta.url), 'utf8')

type Role = 'anon' | 'auth' | 'svc'

interface CallOptions {
  headers?: Record<string, string>
  /** A JSON value (sent as application/json unless a content-type is given), or raw text/bytes. */
  body?: unknown
  /** Run as this role (an upstream token as the gateway signs it); default anon without a token. */
  role?: Role
  claims?: Record<string, unknown>
}

export interface WriteFixture extends RestFixture {
  call(method: string, path: string, o?: CallOptions): Promise<InjectResult>
}

export async function createWriteFixture(t: Teardown, opts: FixtureOptions = {}): Promise<WriteFixture> {
  const fx = await createRestFixture(t, { ...opts, sql: WRITE_SQL + (opts.sql ?? '') })
  return {
    ...fx,
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { ...(o.headers ?? {}) }
      if (o.role !== undefined) headers.authorization = `Bearer ${await fx.token(o.role, o.claims ?? {})}`
      let payload: string | Buffer | undefined
      if (o.body !== undefined) {
        if (typeof o.body === 'string' || Buffer.isBuffer(o.body)) {
          payload = o.body
        } else {
          payload = JSON.stringify(o.body)
          headers['content-type'] ??= 'application/json'
        }
      }
      const res = await fx.app.inject({ method: method as 'GET', url: `/${fx.database}${path}`, headers, payload })
      return { status: res.statusCode, headers: res.headers, body: res.body, json: () => JSON.parse(res.body) }
    },
  }
}
