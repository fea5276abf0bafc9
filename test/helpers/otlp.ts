// An OTLP/HTTP receiver on a port of the kernel's: keeps what is posted to /v1/traces (JSON),
// each span with its resource's string attributes. Not a test file (excluded in .taprc).
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

interface ExportedSpan {
  service: string
  resource: Record<string, string>
  traceId: string
  spanId: string
  parentSpanId: string
  kind: number
  name: string
}

export interface Receiver {
  endpoint: string
  posts: Array<{ contentType: string }>
  spans: ExportedSpan[]
}

export async function startReceiver(t: { teardown(fn: () => unknown): void }): Promise<Receiver> {
  const posts: Array<{ contentType: string }> = []
  const spans: ExportedSpan[] = []
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const contentType = String(req.headers['content-type'] ?? '')
        posts.push({ contentType })
        if (contentType.startsWith('application/json')) {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            resourceSpans: Array<{
              resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> }
              scopeSpans: Array<{ spans: Array<Omit<ExportedSpan, 'service' | 'resource'>> }>
            }>
          }
          for (const rs of body.resourceSpans) {
            const resource: Record<string, string> = {}
            for (const a of rs.resource.attributes)
              if (a.value.stringValue !== undefined) resource[a.key] = a.value.stringValue
            const service = resource['service.name'] ?? ''
            for (const ss of rs.scopeSpans)
              for (const s of ss.spans) spans.push({ ...s, parentSpanId: s.parentSpanId ?? '', service, resource })
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, posts, spans }
}
