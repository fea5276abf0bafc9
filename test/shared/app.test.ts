// The common fastify set-up of the parts: request ids from a well-formed X-Request-Id or a
// fresh UUID, the shared redaction in the default logger, and the part's handlers.
import t from 'tap'
import { Writable } from 'node:stream'
import { createPartApp } from '../../src/shared/app.js'

t.test('request ids: a well-formed X-Request-Id is kept, anything else gets a UUID', async (t) => {
  const app = createPartApp({ notFoundHandler: (req, reply) => reply.code(404).send({ id: req.id }) })
  t.teardown(() => app.close())
  const kept = await app.inject({ url: '/x', headers: { 'x-request-id': 'abc-123' } })
  t.same(kept.json(), { id: 'abc-123' })
  const bad = await app.inject({ url: '/x', headers: { 'x-request-id': 'no spaces\nor newlines' } })
  t.match(bad.json(), { id: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/ })
})

t.test("the default logger redacts credentials; the error handler is the part's", async (t) => {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk))
      done()
    },
  })
  const app = createPartApp({
    log: { level: 'info' },
    // fastify builds the default logger from options; `stream` points it at the test.
    loggerOptions: { stream } as never,
    errorHandler: (err, req, reply) => {
      req.log.error(
        { err: err.message, headers: { authorization: 'Bearer secret-token' }, password: 'hunter2' },
        'failed',
      )
      return reply.code(418).send({ code: 'teapot' })
    },
    fastify: {},
  })
  t.teardown(() => app.close())
  app.get('/boom', async () => {
    throw new Error('boom')
  })
  const r = await app.inject({ url: '/boom' })
  t.equal(r.statusCode, 418)
  t.same(r.json(), { code: 'teapot' })
  const logged = lines.join('')
  t.match(logged, '"msg":"failed"')
  t.match(logged, '"reqId"', 'lines carry the request id as reqId')
  t.notMatch(logged, 'secret-token')
  t.notMatch(logged, 'hunter2')
})
