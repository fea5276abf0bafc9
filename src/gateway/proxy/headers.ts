// Header hygiene both ways. Requests: hop-by-hop and Connection-listed headers, the
// client's credentials, X-Forwarded-*/Forwarded/X-Real-Ip and our reserved x-gatehouse-*
// are dropped FIRST; only then are ours added (re-signed Authorization, overwritten
// X-Forwarded-*, X-Request-Id). Responses: hop-by-hop headers out, our headers in.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'
import { stripHopByHop } from '../../shared/http.js'

function dropFromClient (name: string): boolean {
  switch (name) {
    case 'apikey':
    case 'authorization':
    case 'host':
    case 'expect': // answered by our server (100-continue); never forwarded
    case 'forwarded':
    case 'x-real-ip':
    case 'x-request-id':
      return true
  }
  return name.startsWith('x-forwarded-') || name.startsWith('x-gatehouse-')
}

export interface ForwardedFacts {
  /** The peer address of the client connection. */
  for: string
  /** From config.public_url: the scheme and host clients use (never the client's Host). */
  proto: string
  host: string
}

/** Headers for the upstream request. `authorization` undefined = none is sent. */
export function buildUpstreamHeaders (
  incoming: IncomingHttpHeaders,
  authorization: string | undefined,
  requestId: string,
  fwd: ForwardedFacts
): OutgoingHttpHeaders {
  const out = stripHopByHop(incoming, dropFromClient)
  if (authorization !== undefined) out.authorization = authorization
  out['x-forwarded-for'] = fwd.for
  out['x-forwarded-proto'] = fwd.proto
  out['x-forwarded-host'] = fwd.host
  out['x-request-id'] = requestId
  return out
}

function dropFromUpstream (name: string): boolean {
  return name === 'x-request-id' || name.startsWith('access-control-') || name.startsWith('x-gatehouse-')
}

/** Headers for the client: the upstream's minus hop-by-hop ones, plus ours (request id, CORS, limit). */
export function buildResponseHeaders (upstream: IncomingHttpHeaders, ours: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out = stripHopByHop(upstream, dropFromUpstream)
  const upstreamVary = out.vary
  for (const name in ours) {
    const v = ours[name]
    if (v !== undefined) out[name] = v
  }
  if (upstreamVary !== undefined && ours.vary !== undefined) out.vary = `${String(upstreamVary)}, ${String(ours.vary)}`
  return out
}
