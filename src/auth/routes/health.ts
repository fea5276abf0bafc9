// GET /health (docs/auth-protocol.md §3.1): GoTrue's identification body. Answers for any known tenant
// without touching its database.

export const HEALTH_BODY = {
  version: 'gatehouse-0.1.0',
  name: 'GoTrue',
  description: 'GoTrue is a user registration and authentication API',
}

export async function getHealth(): Promise<typeof HEALTH_BODY> {
  return HEALTH_BODY
}
