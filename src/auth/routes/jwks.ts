// GET /.well-known/jwks.json (spec §3.18): public keys of asymmetric signing keys. Tenants
// sign with HS256 only, and symmetric keys are never published, so the set is empty.
import type { FastifyInstance } from 'fastify'

export async function jwksRoutes (scope: FastifyInstance): Promise<void> {
  scope.get('/.well-known/jwks.json', async (_req, reply) => {
    reply.header('cache-control', 'public, max-age=600')
    return { keys: [] }
  })
}
