// The gateway server's request and response classes: node:http's own, with the fields the
// gateway sets on each request (its RequestInfo) and each response (its in-flight slot, its
// upstream exchange, its send watch) there from the start. node:http makes a server's
// requests and responses with the classes it is given (http.createServer's IncomingMessage
// and ServerResponse options). Added to an object later, each of these fields moved it to
// another hidden class, so node:http's own code, which touches every request and response
// many times, met each of them in several shapes (slower property look-ups throughout); now
// they all have one. Objects made elsewhere (fastify's inject()) get the fields added as before.
import http from 'node:http'

/** The request's RequestInfo (pipeline.ts). */
export const kInfo = Symbol('gatehouse.requestInfo')
/** The tenant count and client key of the response's in-flight slot (inflight.ts). */
export const kTenant = Symbol('gatehouse.inflightTenant')
export const kClient = Symbol('gatehouse.inflightClient')
/** The response's upstream exchange (proxy/forward.ts). */
export const kForward = Symbol('gatehouse.forward')
/** The timer watching a slow reader (proxy/forward.ts). */
export const kSendWatch = Symbol('gatehouse.sendWatch')

export class GatewayRequest extends http.IncomingMessage {
  [kInfo]: unknown = undefined
}

export class GatewayResponse extends http.ServerResponse {
  [kTenant]: unknown = undefined;
  [kClient]: unknown = undefined;
  [kForward]: unknown = undefined;
  [kSendWatch]: unknown = undefined
}
