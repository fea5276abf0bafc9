// The OAuth 2.1 server's clients (docs/auth-protocol.md §3.22), GoTrue's oauthserver handlers:
// the admin API under the service_role token (POST/GET /admin/oauth/clients, GET/PUT/DELETE
// /admin/oauth/clients/:client_id, POST .../regenerate_secret) and dynamic registration
// (POST /oauth/clients/register, RFC 7591) when the database allows it. A secret is shown only
// in the answer that made it.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { withTransaction } from '../../shared/index.js'
import { UUID } from '../bearer.js'
import { OAuthClientNotFoundError, OAuthDynamicRegistrationDisabledError, ValidationFailedError } from '../errors.js'
import { bodyOf } from '../http.js'
import { deleteSessionsOfOAuthClient } from '../models/sessions.js'
import {
  deleteOAuthClient,
  findOAuthClient,
  insertOAuthClient,
  listOAuthClients,
  updateOAuthClient,
  type OAuthClientRow,
} from '../models/oauth-clients.js'
import {
  clientJson,
  hashClientSecret,
  newClientCredentials,
  newClientSecret,
  parseClientUpdate,
  parseRegistration,
} from '../oauth-client-rules.js'
import { contextOf } from '../request-state.js'
import type { TenantContext } from '../types.js'
import { oauthServerOf } from '../../tenants/index.js'
import { pageParams } from './admin.js'

/** The client of the path's `:client_id` (GoTrue's LoadOAuthServerClient). */
async function pathClient(ctx: TenantContext, req: FastifyRequest): Promise<OAuthClientRow> {
  const id = (req.params as { client_id?: string }).client_id ?? ''
  if (id === '') throw new ValidationFailedError('request', 'client_id is required')
  if (!UUID.test(id)) throw new ValidationFailedError('request', 'invalid client_id format')
  const client = await findOAuthClient(ctx.db, id.toLowerCase())
  if (!client) throw new OAuthClientNotFoundError('admin')
  return client
}

async function register(req: FastifyRequest, reply: FastifyReply, type: 'manual' | 'dynamic'): Promise<unknown> {
  const ctx = contextOf(req)
  const r = parseRegistration(bodyOf(req))
  const creds = newClientCredentials(r.clientType)
  const client = await insertOAuthClient(ctx.db, {
    ...r.fields,
    id: creds.id,
    client_secret_hash: creds.hash,
    registration_type: type,
    client_type: r.clientType,
    now: ctx.now(),
  })
  reply.code(201)
  return clientJson(client, creds.secret)
}

export async function postAdminOAuthClient(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  return register(req, reply, 'manual')
}

export async function postDynamicRegistration(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  if (!oauthServerOf(contextOf(req).tenant.auth).allow_dynamic_registration)
    throw new OAuthDynamicRegistrationDisabledError()
  return register(req, reply, 'dynamic')
}

export async function getAdminOAuthClients(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  // Without per_page every client (GoTrue lists all).
  const { page, perPage } = pageParams(req)
  const offset = perPage === null ? 0 : (page - 1) * perPage
  const { clients, total } = await listOAuthClients(ctx.db, { limit: perPage, offset })
  reply.header('x-total-count', String(total))
  if (perPage !== null) {
    const link = (p: number) => `<${ctx.externalUrl}/admin/oauth/clients?page=${p}&per_page=${perPage}>`
    const parts: string[] = []
    if (total > page * perPage) parts.push(`${link(page + 1)}; rel="next"`)
    parts.push(`${link(Math.max(1, Math.ceil(total / perPage)))}; rel="last"`)
    reply.header('link', parts.join(', '))
  }
  return { clients: clients.map((c) => clientJson(c)) }
}

export async function getAdminOAuthClient(req: FastifyRequest): Promise<unknown> {
  return clientJson(await pathClient(contextOf(req), req))
}

export async function putAdminOAuthClient(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const client = await pathClient(ctx, req)
  const fields = parseClientUpdate(bodyOf(req), client)
  const updated = await updateOAuthClient(ctx.db, client.id, fields, ctx.now())
  if (!updated) throw new OAuthClientNotFoundError('admin')
  return clientJson(updated)
}

/** Soft-deletes the client (GoTrue's answer, 204) and ends the sessions it holds. */
export async function deleteAdminOAuthClient(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const ctx = contextOf(req)
  const client = await pathClient(ctx, req)
  await withTransaction(ctx.db, async (q) => {
    if (!(await deleteOAuthClient(q, client.id, ctx.now()))) throw new OAuthClientNotFoundError('admin')
    await deleteSessionsOfOAuthClient(q, client.id)
  })
  reply.code(204)
  return reply.send()
}

export async function postRegenerateSecret(req: FastifyRequest): Promise<unknown> {
  const ctx = contextOf(req)
  const client = await pathClient(ctx, req)
  if (client.client_type !== 'confidential')
    throw new ValidationFailedError('request', 'Cannot regenerate secret for public client')
  const secret = newClientSecret()
  const updated = await updateOAuthClient(
    ctx.db,
    client.id,
    { client_secret_hash: hashClientSecret(secret) },
    ctx.now(),
  )
  if (!updated) throw new OAuthClientNotFoundError('admin')
  return clientJson(updated, secret)
}
