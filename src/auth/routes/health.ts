// GET /health (docs/auth-protocol.md §3.1): GoTrue's identification body. Answers for any known tenant
// without touching its database.
import type { FastifyInstance } from 'fastify'

export const HEALTH_BODY = {
  version: 'gatehouse-0.1.0',
  name: 'GoTrue',
  description: 'GoTrue is a user registration and authentication API'
}

export async function healthRoutes (scope: FastifyInstance): Promise<void> {
  scope.get('/health', async () => HEALTH_BODY)
}
