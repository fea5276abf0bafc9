// Ports for tests that need one nothing listens on: the kernel names a free port, which is
// closed again at once (a connection to it is refused, unless another process takes it since).
import net from 'node:net'

/** A port nobody listens on this moment. */
export function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.on('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo
      srv.close(() => resolve(port))
    })
  })
}
