// Functions for the RPC tests (not a test file), created by the tenant owner on top of the
// write fixture: scalar, composite, set-returning, OUT parameters, single unnamed
// parameters, overloads, volatile writers, void, RAISE, response.* settings.
import { readFileSync } from 'node:fs'
export const RPC_SQL = readFileSync(new URL('../fixtures/rpc.sql', import.meta.url), 'utf8')
