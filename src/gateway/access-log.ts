// The access-log line of every answered request (responder.ts), the bytes pino writes for
// `logger.info(fields, 'request completed')` but built in one template instead of pino's
// generic walk over the fields (its per-key serializer, stringifier and escaping look-ups
// cost more than the rest of the line; the fields here are always the same few). It reads
// the logger's own level prefix, time, bindings and line end through pino's integration
// symbols (pino.symbols, documented in pino's API docs), so the line is the same byte for
// byte; a logger configured in any way that changes what pino would write for these fields
// (mixin, nestedKey, msgPrefix, hooks, serializers or redaction of these keys, another
// message key, a stream that wants the line's metadata) gets them through pino's info().
// test/gateway/access-log.test.ts compares the two.
import type { FastifyBaseLogger } from 'fastify'
import pino from 'pino'

export const ACCESS_MESSAGE = 'request completed'

/** The fields of one access-log line, in the order they are written. */
export interface AccessLine {
  reqId: string
  tenant: string
  method: string
  url: string
  status: number
  ms: number
  code?: string
  trace_id?: string
  span_id?: string
}

const FIELDS: readonly string[] = ['reqId', 'tenant', 'method', 'url', 'status', 'ms', 'code', 'trace_id', 'span_id']

/** Writes one access line to `log`. */
export type AccessLogWriter = (line: AccessLine) => void

// msgPrefixSym is among them at run time, not in pino's type declarations.
const S = pino.symbols as unknown as Record<string, symbol>
const METADATA = Symbol.for('pino.metadata')

type PinoInternals = Record<symbol, unknown> & {
  levels?: { values?: Record<string, number> }
  isLevelEnabled?: (level: string) => boolean
}

/** `log.info(line, ACCESS_MESSAGE)`, through the template when pino would write the same bytes. */
export function accessLogWriter(log: FastifyBaseLogger): AccessLogWriter {
  const viaPino: AccessLogWriter = (line) => {
    log.info(line, ACCESS_MESSAGE)
  }
  const l = log as unknown as PinoInternals
  if (!writesPlainLines(l)) return viaPino
  const info = l.levels!.values!.info!
  const stream = l[S.streamSym] as { write: (s: string) => void }
  const time = l[S.timeSym] as () => string
  const end = l[S.endSym] as string
  const msg = `,"msg":${JSON.stringify(ACCESS_MESSAGE)}${end}`
  const stamp = timestamp(time, l)
  return (line) => {
    if (!l.isLevelEnabled!('info')) return
    // Strings pino would write unescaped where JSON.stringify escapes them (a lone surrogate
    // in a short string): pino writes that line. None of our fields carries one in practice.
    if (hasSurrogate(line.url) || hasSurrogate(line.reqId)) {
      viaPino(line)
      return
    }
    let s = `${(l[S.lsCacheSym] as Record<number, string>)[info]!}${stamp()}${l[S.chindingsSym] as string},"reqId":${JSON.stringify(line.reqId)},"tenant":${JSON.stringify(line.tenant)},"method":${JSON.stringify(line.method)},"url":${JSON.stringify(line.url)},"status":${num(line.status)},"ms":${tenths(line.ms)}`
    if (line.code !== undefined) s += `,"code":${JSON.stringify(line.code)}`
    if (line.trace_id !== undefined) s += `,"trace_id":${JSON.stringify(line.trace_id)}`
    if (line.span_id !== undefined) s += `,"span_id":${JSON.stringify(line.span_id)}`
    stream.write(s + msg)
  }
}

/** pino's number: null when not finite. */
function num(n: number): string {
  return Number.isFinite(n) ? String(n) : 'null'
}

/**
 * num() of a duration rounded to tenths (the responder's `ms`), written from its integer
 * tenths: the same digits as String(n) (the shortest form of q + r/10 is `q.r`, or `q`),
 * without converting a fraction.
 */
function tenths(n: number): string {
  const t = Math.round(n * 10)
  if (t / 10 !== n || t < 0 || t > 0x3fffffff) return num(n)
  const q = (t / 10) | 0
  const r = t - q * 10
  return r === 0 ? String(q) : `${q}.${r}`
}

/**
 * The logger's time field: pino's epochTime made once per millisecond (a busy gateway
 * writes several lines in one), any other time function called as pino calls it.
 */
function timestamp(time: () => string, l: PinoInternals): () => string {
  if (time !== pino.stdTimeFunctions.epochTime) return () => time.call(l)
  let last = -1
  let text = ''
  return () => {
    const now = Date.now()
    if (now !== last) {
      last = now
      text = `,"time":${now}`
    }
    return text
  }
}

/** A UTF-16 surrogate in a string under 100 characters (pino JSON-escapes longer ones too). */
function hasSurrogate(s: string): boolean {
  return s.length < 100 && /[\ud800-\udfff]/.test(s)
}

/** Whether pino writes our fields of this logger as plain JSON with nothing of its own in between. */
function writesPlainLines(l: PinoInternals): boolean {
  const stream = l[S.streamSym] as { write?: unknown; [METADATA]?: unknown } | undefined
  const hooks = l[S.hooksSym] as { logMethod?: unknown; streamWrite?: unknown } | undefined
  const serializers = (l[S.serializersSym] ?? {}) as Record<string, unknown>
  const stringifiers = (l[S.stringifiersSym] ?? {}) as Record<string | symbol, unknown>
  const lsCache = l[S.lsCacheSym] as Record<number, unknown> | undefined
  const info = l.levels?.values?.info
  return (
    typeof stream?.write === 'function' &&
    stream[METADATA] !== true &&
    typeof l.isLevelEnabled === 'function' &&
    typeof info === 'number' &&
    typeof lsCache?.[info] === 'string' &&
    typeof l[S.timeSym] === 'function' &&
    typeof l[S.chindingsSym] === 'string' &&
    typeof l[S.endSym] === 'string' &&
    l[S.messageKeySym] === 'msg' &&
    l[S.mixinSym] == null &&
    l[S.nestedKeySym] == null &&
    l[S.msgPrefixSym] == null &&
    hooks?.logMethod == null &&
    hooks?.streamWrite == null &&
    stringifiers[S.wildcardFirstSym] == null &&
    ![...FIELDS, 'msg'].some((k) => serializers[k] !== undefined || stringifiers[k] !== undefined)
  )
}
