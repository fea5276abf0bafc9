// Header hygiene both ways. Requests: hop-by-hop and Connection-listed headers, the
// client's credentials, X-Forwarded-*/Forwarded/X-Real-Ip and our reserved x-gatehouse-*
// are dropped FIRST; only then are ours added (re-signed Authorization, overwritten
// X-Forwarded-*, X-Request-Id). Responses: hop-by-hop headers out, our headers in.
// Hot path: one pass over the headers, no per-name lower-casing where Node already did it.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'
import { HOP_BY_HOP, connectionListed } from '../../shared/index.js'

// Values of `Connection` that list no other header (the common case: nothing to parse).
function listedIn(connection: string | string[] | undefined): Set<string> | null {
  if (connection === undefined) return null
  if (typeof connection === 'string') {
    const c = connection.length < 11 ? connection.toLowerCase() : ''
    if (c === 'keep-alive' || c === 'close') return null
  }
  return connectionListed(connection)
}

function dropFromClient(name: string): boolean {
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
  return name.charCodeAt(0) === 120 /* x */ && (name.startsWith('x-forwarded-') || name.startsWith('x-gatehouse-'))
}

export interface ForwardedFacts {
  /** The peer address of the client connection. */
  for: string
  /** From config.public_url: the scheme and host clients use (never the client's Host). */
  proto: string
  host: string
}

/**
 * Headers PostgREST reads by their first line (Accept, Range, the profiles, Cookie) or line
 * by line (Prefer): repeated, they are forwarded as sent, since Node joins them into one.
 */
const REPEATED_LINES: ReadonlySet<string> = new Set([
  'accept',
  'accept-profile',
  'content-profile',
  'range',
  'prefer',
  'cookie',
])

/**
 * Headers for the upstream request. `incoming` is Node's parsed request headers (names
 * already lower case). `authorization` undefined = none is sent.
 */
export function buildUpstreamHeaders(
  incoming: IncomingHttpHeaders,
  authorization: string | undefined,
  requestId: string,
  fwd: ForwardedFacts,
  lines?: () => Readonly<Record<string, readonly string[] | undefined>>,
): OutgoingHttpHeaders {
  const listed = listedIn(incoming.connection)
  const out: OutgoingHttpHeaders = {}
  for (const name in incoming) {
    if (HOP_BY_HOP.has(name) || dropFromClient(name) || (listed !== null && listed.has(name))) continue
    const value = incoming[name]
    // A repeated header the engines read line by line goes on as its lines, not Node's join
    // (which has a `,`, or `;` for Cookie: only then are the lines asked for, since Node
    // builds them for every header at once).
    const each =
      REPEATED_LINES.has(name) && typeof value === 'string' && (value.includes(',') || value.includes(';'))
        ? lines?.()[name]
        : undefined
    if (each !== undefined && each.length > 1) out[name] = [...each]
    else if (value !== undefined) out[name] = value
  }
  // Transfer-Encoding is hop-by-hop, but a chunked body must stay framed on the next hop:
  // Node frames a GET/DELETE/OPTIONS body only when told to, and would otherwise send the
  // bytes bare, where the upstream reads them as the next request on the connection.
  if (incoming['transfer-encoding'] !== undefined) out['transfer-encoding'] = 'chunked'
  if (authorization !== undefined) out.authorization = authorization
  out['x-forwarded-for'] = fwd.for
  out['x-forwarded-proto'] = fwd.proto
  out['x-forwarded-host'] = fwd.host
  out['x-request-id'] = requestId
  return out
}

/** x-gatehouse-* is ours: an upstream's (a function can set any header) never reaches the client. */
function dropFromUpstream(lower: string): boolean {
  return lower === 'x-request-id' || lower.startsWith('access-control-') || lower.startsWith('x-gatehouse-')
}

/** What the response side reads of an upstream answer's head (readUpstreamHead()). */
export interface UpstreamHead {
  /**
   * The upstream's headers the client gets, a flat [name, value, ...] list (case and
   * repeats kept): not hop-by-hop, not Connection-listed, none of ours. withOurs() adds ours.
   */
  kept: string[]
  /** The upstream's Vary values, held back to be merged with ours (when we have one). */
  vary: string | null
  /** The first Content-Type. */
  contentType: string | undefined
  /** The first Content-Range (whether a read was cut by the default limit). */
  contentRange: string | undefined
  /** A Content-Encoding was sent. */
  encoded: boolean
  /** A Retry-After was sent. */
  retryAfter: boolean
}

/**
 * One pass over undici's raw response headers (Buffers): each name and value read once as
 * a string, sorted into what the client gets and what the proxy must know. `oursVary`: our
 * headers have a Vary (the upstream's is merged into it).
 */
export function readUpstreamHead(rawHeaders: readonly Buffer[], oursVary: boolean): UpstreamHead {
  const head: UpstreamHead = {
    kept: [],
    vary: null,
    contentType: undefined,
    contentRange: undefined,
    encoded: false,
    retryAfter: false,
  }
  const strings = latin1Strings(rawHeaders)
  let connection: string[] | undefined
  for (let i = 0; i < strings.length; i += 2) {
    const name = strings[i]!
    const value = strings[i + 1]!
    const lower = name.toLowerCase()
    if (HOP_BY_HOP.has(lower)) {
      if (lower === 'connection') (connection ??= []).push(value)
      continue
    }
    if (dropFromUpstream(lower) || noteHeader(head, lower, value, oursVary)) continue
    head.kept.push(name, value)
  }
  // Headers the Connection header lists are hop-by-hop too (RFC 9110 §7.6.1): rare, so
  // taken out afterwards (the Connection header may come after them).
  const listed = listedIn(connection?.length === 1 ? connection[0] : connection)
  if (listed !== null) {
    const all = head.kept
    head.kept = []
    for (let i = 0; i < all.length; i += 2) if (!listed.has(all[i]!.toLowerCase())) head.kept.push(all[i]!, all[i + 1]!)
    if (listed.has('vary')) head.vary = null
  }
  return head
}

/** A head larger than this is read header by header (latin1Strings). */
const ONE_DECODE_MAX_BYTES = 64 * 1024

/**
 * undici's raw header list as strings, [name, value, ...]. undici's Buffers are views of
 * the socket chunk the head arrived in: when they all are, the stretch of the chunk they
 * span is decoded once and each name and value is a slice of that text (one decode instead
 * of one per name and value, which cost more than the rest of reading the head); a head
 * that came in several chunks (or a header undici joined) is decoded Buffer by Buffer.
 */
export function latin1Strings(raw: readonly Buffer[]): string[] {
  const n = raw.length
  const out = new Array<string>(n)
  if (n === 0) return out
  const ab = raw[0]!.buffer
  let lo = raw[0]!.byteOffset
  let hi = lo
  for (let i = 0; i < n; i++) {
    const b = raw[i]!
    if (b.buffer !== ab) return eachLatin1(raw, out)
    const start = b.byteOffset
    const end = start + b.length
    if (start < lo) lo = start
    if (end > hi) hi = end
  }
  if (hi - lo > ONE_DECODE_MAX_BYTES) return eachLatin1(raw, out)
  const text = Buffer.from(ab, lo, hi - lo).toString('latin1')
  for (let i = 0; i < n; i++) {
    const b = raw[i]!
    const at = b.byteOffset - lo
    out[i] = text.slice(at, at + b.length)
  }
  return out
}

function eachLatin1(raw: readonly Buffer[], out: string[]): string[] {
  for (let i = 0; i < raw.length; i++) out[i] = raw[i]!.toString('latin1')
  return out
}

/** Notes what the proxy reads of one header; true when it is held back from the list (a Vary to merge). */
function noteHeader(head: UpstreamHead, lower: string, value: string, oursVary: boolean): boolean {
  switch (lower) {
    case 'content-type':
      head.contentType ??= value
      return false
    case 'content-range':
      head.contentRange ??= value
      return false
    case 'content-encoding':
      head.encoded = true
      return false
    case 'retry-after':
      head.retryAfter = true
      return false
    case 'vary':
      if (!oursVary) return false
      head.vary = head.vary === null ? value : `${head.vary}, ${value}`
      return true
  }
  return false
}

/** The client's headers: the upstream's kept ones, then ours (a Vary of ours merged with the upstream's). */
export function withOurs(head: UpstreamHead, ours: OutgoingHttpHeaders): string[] {
  const out = head.kept
  for (const name in ours) {
    const v = ours[name]
    if (v === undefined) continue
    if (name === 'vary' && head.vary !== null) {
      out.push('vary', `${head.vary}, ${String(v)}`)
      continue
    }
    if (Array.isArray(v)) {
      for (const x of v) out.push(name, x)
    } else out.push(name, String(v))
  }
  return out
}
