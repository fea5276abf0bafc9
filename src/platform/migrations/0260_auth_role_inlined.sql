-- 0260_auth_role_inlined: auth.role() in a shape the planner inlines. 0002_auth wrote it as a
-- SELECT with a FROM (a sub-select naming the role once) and says it is inlinable: it is not.
-- Postgres inlines a SQL function into the calling query only when its body is a single
-- SELECT of one expression with no FROM, no sub-select, no SET clause and no SECURITY DEFINER
-- (PostgreSQL wiki, "Inlining of SQL functions"; inline_function in PostgreSQL's
-- src/backend/optimizer/util/clauses.c), so a policy `using (auth.role() = 'authenticated')`
-- called the function once per row. Same definition, same answers for every input:
--   the legacy per-claim setting request.jwt.claim.role (PostgREST < 12; GoTrue reads it first),
--   else the role of request.jwt.claims, else the current role when it is one of this
--   database's three request roles; this database's three role names are answered as
--   anon / authenticated / service_role, any other value as it is.
-- The names are written into the body here (from gatehouse.role_<kind>, set by the migration
-- runner). A simple CASE evaluates its subject once; the ELSE reads the claim again only when
-- it is not one of the three names (then the current role cannot be one of them either: the
-- current-role fallback is left out there, the answer is the same). CREATE OR REPLACE keeps
-- the owner (the auth engine login) and the grants of 0002_auth. auth.uid(), auth.email()
-- (0002_auth) and auth.jwt() (0250_auth_jwt_role) already have this shape.
DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE AS $body$
      SELECT CASE coalesce(
          nullif(current_setting('request.jwt.claim.role', true), ''),
          nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role',
          CASE WHEN current_user IN (%1$L, %2$L, %3$L) THEN current_user::text END
        )
        WHEN %1$L THEN 'anon' WHEN %2$L THEN 'authenticated' WHEN %3$L THEN 'service_role'
        ELSE coalesce(
          nullif(current_setting('request.jwt.claim.role', true), ''),
          nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role'
        )
      END
    $body$
  $f$, current_setting('gatehouse.role_anon'), current_setting('gatehouse.role_auth'), current_setting('gatehouse.role_svc'));
END
$do$;

COMMENT ON FUNCTION auth.role() IS 'anon | authenticated | service_role (this tenant''s role names mapped back). Deprecated in GoTrue in favour of auth.jwt() ->> ''role''.';

RESET ROLE;
