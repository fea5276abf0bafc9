// The /token grants: one function per grant_type (as GoTrue's token.go), `pkce` and
// `id_token` included; routes/token.ts only dispatches.
import type { FastifyRequest } from 'fastify'
import type { Body } from '../http.js'
import type { AccessTokenResponse, TenantContext } from '../types.js'
import { idTokenGrant } from './id-token.js'
import { passwordGrant } from './password.js'
import { pkceGrant } from './pkce.js'
import { refreshTokenGrant } from './refresh-token.js'
import { Web3DisabledError } from '../errors.js'

export type Grant = (ctx: TenantContext, req: FastifyRequest, body: Body) => Promise<AccessTokenResponse>

export const GRANTS: Partial<Record<string, Grant>> = {
  id_token: idTokenGrant,
  password: passwordGrant,
  pkce: pkceGrant,
  refresh_token: refreshTokenGrant,
  // Sign-in with a wallet is not offered: GoTrue's answer with both Web3 providers off.
  web3: async () => {
    throw new Web3DisabledError()
  },
}
