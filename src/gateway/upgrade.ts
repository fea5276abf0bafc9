// Upgrade requests (WebSocket: supabase-js's Realtime client opens /<db>/realtime/v1/websocket).
// No service here takes one, so each is answered over plain HTTP with the JSON error a request
// to the same path gets (service_not_offered for Realtime) and the connection closed, instead
// of Node's default of dropping the socket (a bare transport failure for the client).
import { STATUS_CODES, type IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { requestIdOf } from '../shared/index.js'
import { NotFoundError } from './errors.js'
import { notServedError, parseGatewayPath } from './request/path.js'
import { renderError } from './render.js'

/** The error for an upgrade of `url`. */
function upgradeError(url: string): unknown {
  try {
    const gp = parseGatewayPath(url)
    return gp.service === null ? notServedError(gp.path) : new NotFoundError()
  } catch (err) {
    return err
  }
}

/** Writes the JSON error for the upgrade request and ends the connection. */
export function refuseUpgrade(req: IncomingMessage, socket: Duplex, extraHeaders: Record<string, string> = {}): void {
  socket.on('error', () => {})
  const id = requestIdOf(req)
  const r = renderError(upgradeError(req.url ?? '/'), id)
  const headers: Record<string, string> = {
    ...extraHeaders,
    ...r.headers,
    'x-request-id': id,
    'content-length': String(Buffer.byteLength(r.body)),
    connection: 'close',
  }
  const head = [
    `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ''}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ]
  socket.end(head.join('\r\n') + '\r\n\r\n' + r.body)
}
