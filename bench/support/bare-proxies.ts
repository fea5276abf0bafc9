// Bare passthrough proxies (no keys, no tokens, no header work of ours): what one HTTP hop
// through Node costs with each upstream client, the floor under a gateway built on it.
//   classic: http-proxy-3's node:http path, one keep-alive http.Agent per upstream.
//   fetch:   http-proxy-3's fetch path over an undici Agent (a keep-alive pool per upstream
//            origin). http-proxy-3 adds `Connection: close` to every upstream request that
//            has no http.Agent (its setupOutgoing); left in, fetch closes each upstream
//            connection after one request, so onBeforeRequest takes it out.
//   undici:  undici's Pool.dispatch() with a streaming handler (the gateway's own client).
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { ProxyServer } from 'http-proxy-3'
import { Agent, Pool, type Dispatcher } from 'undici'

export type BareKind = 'classic' | 'fetch' | 'undici'

export const BARE_DESCRIPTIONS: Record<BareKind, string> = {
  classic: "http-proxy-3's classic path (node:http client, keep-alive http.Agent), nothing else",
  fetch: "http-proxy-3's fetch path over an undici Agent (keep-alive pool per upstream), nothing else",
  undici: 'undici Pool.dispatch() (keep-alive pool per upstream) streaming both ways, nothing else',
}

export interface BareProxy {
  port: number
  close: () => Promise<void>
}

const HOP = new Set([
  'connection',
  'keep-alive',
  'host',
  'transfer-encoding',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
])

function undiciHandler(pool: Pool, target: URL): http.RequestListener {
  const base = target.pathname === '/' ? '' : target.pathname.replace(/\/$/, '')
  return (req, res) => {
    const headers: string[] = []
    const raw = req.rawHeaders
    for (let i = 0; i < raw.length; i += 2) if (!HOP.has(raw[i]!.toLowerCase())) headers.push(raw[i]!, raw[i + 1]!)
    const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined
    let resume: (() => void) | null = null
    res.on('drain', () => resume?.())
    const handler: Dispatcher.DispatchHandler = {
      onConnect() {},
      onHeaders(status, rawHeaders, res2) {
        resume = res2
        const out: string[] = []
        for (let i = 0; i < rawHeaders.length; i += 2) {
          const k = rawHeaders[i]!.toString('latin1')
          if (!HOP.has(k.toLowerCase())) out.push(k, rawHeaders[i + 1]!.toString('latin1'))
        }
        res.writeHead(status, out)
        return true
      },
      onData(chunk) {
        return res.write(chunk)
      },
      onComplete() {
        res.end()
      },
      onError() {
        if (!res.headersSent) {
          res.writeHead(502)
          res.end()
        } else res.destroy()
      },
    }
    pool.dispatch(
      {
        path: base + (req.url ?? '/'),
        method: req.method as Dispatcher.HttpMethod,
        headers,
        body: hasBody ? req : null,
      },
      handler,
    )
  }
}

export async function startBareProxy(kind: BareKind, target: string, keepAliveMs: number): Promise<BareProxy> {
  const url = new URL(target)
  let onClose = async (): Promise<void> => {}
  let listener: http.RequestListener
  if (kind === 'undici') {
    const pool = new Pool(url.origin, { connections: 512, keepAliveTimeout: keepAliveMs })
    onClose = async () => {
      await pool.destroy()
    }
    listener = undiciHandler(pool, url)
  } else {
    let proxy: ProxyServer
    if (kind === 'classic') {
      const agent = new http.Agent({
        keepAlive: true,
        keepAliveMsecs: 1000,
        timeout: keepAliveMs,
        maxSockets: 512,
        maxFreeSockets: 256,
        scheduling: 'lifo',
      })
      proxy = new ProxyServer({ target, agent })
      onClose = async () => {
        agent.destroy()
      }
    } else {
      const dispatcher = new Agent({ connections: 512, keepAliveTimeout: keepAliveMs })
      proxy = new ProxyServer({
        target,
        fetchOptions: {
          requestOptions: { dispatcher },
          onBeforeRequest: async (o: { headers?: unknown }) => {
            ;(o.headers as Headers).delete('connection')
          },
        },
      } as ConstructorParameters<typeof ProxyServer>[0])
      onClose = async () => {
        await dispatcher.destroy()
      }
    }
    listener = (req, res) => {
      proxy.web(req, res, {}, (err) => {
        if (!res.headersSent) {
          res.writeHead(502)
          res.end()
        } else res.destroy(err)
      })
    }
  }
  const server = http.createServer(listener)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await onClose()
    },
  }
}
