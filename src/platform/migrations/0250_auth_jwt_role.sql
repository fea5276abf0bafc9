-- 0250_auth_jwt_role: auth.jwt() answers the role claim as Supabase apps compare it. The
-- gateway's upstream token carries this database's Postgres role name (`t_<hex>_auth`), which
-- the REST engine (ours or a real PostgREST) uses for SET ROLE and puts into
-- request.jwt.claims as it is; policies written for Supabase compare
-- `auth.jwt() ->> 'role'` with 'anon', 'authenticated' or 'service_role' and would never
-- match. auth.jwt() keeps GoTrue's definition (the legacy request.jwt.claim, else
-- request.jwt.claims, as jsonb) and maps this database's three request roles back, as
-- auth.role() does (0002_auth); any other role value and every other claim are unchanged.
-- The raw setting keeps the role name (docs/supabase.md, "The role claim in SQL").
--
-- Plain SQL, STABLE, one SELECT without FROM, so the planner inlines it into a policy or a
-- query (a SELECT with FROM, as auth.role()'s, is not inlined). The names are written into
-- the body here (from gatehouse.role_<kind>, set by the migration runner). CREATE OR REPLACE
-- keeps the owner (the auth engine login) and the grants of 0002_auth.
DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE AS $body$
      SELECT CASE (coalesce(
          nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), '')
        )::jsonb) ->> 'role'
        WHEN %1$L THEN coalesce(nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), ''))::jsonb || '{"role": "anon"}'::jsonb
        WHEN %2$L THEN coalesce(nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), ''))::jsonb || '{"role": "authenticated"}'::jsonb
        WHEN %3$L THEN coalesce(nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), ''))::jsonb || '{"role": "service_role"}'::jsonb
        ELSE coalesce(nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), ''))::jsonb
      END
    $body$
  $f$, current_setting('gatehouse.role_anon'), current_setting('gatehouse.role_auth'), current_setting('gatehouse.role_svc'));
END
$do$;

COMMENT ON FUNCTION auth.jwt() IS 'The request''s JWT claims; role is anon | authenticated | service_role for this tenant''s role names (as auth.role()).';

RESET ROLE;
