// rest.extra_search_path (PostgREST's db-extra-search-path, default public): the schemas put
// after the request's on each request's search path, so a function body that names an object
// of an extension schema unqualified finds it.
import t from 'tap'
import { startRestGateway } from '../../helpers/rest-gateway.js'

const SQL = `
CREATE SCHEMA api;
CREATE SCHEMA extensions;
GRANT USAGE ON SCHEMA api, extensions TO PUBLIC;
CREATE FUNCTION extensions.helper() RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT 41';
SET check_function_bodies = off;
CREATE FUNCTION api.answer() RETURNS int LANGUAGE sql STABLE AS 'SELECT helper() + 1';
`

t.test('the extra search path is on every request search path', async (t) => {
  const withExtensions = await startRestGateway(t, { sql: SQL, rest: { schemas: ['api'], extra_search_path: ['public', 'extensions'] } })
  const r = await withExtensions.client().schema('api').rpc('answer')
  t.same({ status: r.status, data: r.data, error: r.error }, { status: 200, data: 42, error: null })

  const byDefault = await startRestGateway(t, { sql: SQL, rest: { schemas: ['api'] } })
  const missing = await byDefault.client().schema('api').rpc('answer')
  t.equal(missing.error?.code, '42883', 'by default only public follows the request schema: helper() is not found')
})
