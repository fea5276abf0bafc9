// GET /.well-known/jwks.json (spec §3.18): the public halves of this tenant's asymmetric
// signing keys (every listed key, the one that signs now and the older ones that still
// verify), in GoTrue's shape. The HS256 secret is never published.
import type { FastifyInstance } from 'fastify'
import { contextOf } from '../hooks/resolve-tenant.js'

export async function jwksRoutes (scope: FastifyInstance): Promise<void> {
  scope.get('/.well-known/jwks.json', async (req, reply) => {
    const ctx = contextOf(req)
    reply.header('cache-control', 'public, max-age=600')
    return { keys: (ctx.tenant.jwt.signing_keys ?? []).map((k) => k.public_jwk) }
  })
}
