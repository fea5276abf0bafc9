// A TCP relay to a Postgres (or any TCP server) that counts the connections made through it
// and the chunks clients send: a client that pipelines a round trip sends it as one chunk.
import net from 'node:net'

export interface TcpRelay {
  /** `target` with its host and port replaced by the relay's. */
  url: string
  port: number
  connections: () => number
  chunks: () => number
  reset: () => void
}

export async function tcpRelay(t: { teardown: (fn: () => void) => void }, target: URL): Promise<TcpRelay> {
  let connections = 0
  let chunks = 0
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    connections++
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    sockets.add(client)
    sockets.add(upstream)
    client.setNoDelay(true)
    upstream.setNoDelay(true)
    client.on('data', (c) => {
      chunks++
      upstream.write(c)
    })
    upstream.on('data', (c) => client.write(c))
    const close = (): void => {
      client.destroy()
      upstream.destroy()
    }
    client.on('close', close)
    upstream.on('close', close)
    client.on('error', close)
    upstream.on('error', close)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const s of sockets) s.destroy()
    server.close()
  })
  const port = (server.address() as net.AddressInfo).port
  const via = new URL(target.href)
  via.hostname = '127.0.0.1'
  via.port = String(port)
  return {
    url: via.href,
    port,
    connections: () => connections,
    chunks: () => chunks,
    reset: () => {
      chunks = 0
    },
  }
}
