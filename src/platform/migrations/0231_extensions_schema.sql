-- 0231_extensions_schema: the schema `extensions` (where 0230 put pgcrypto) as Supabase projects
-- have it: the database's owner may create in it (`CREATE EXTENSION ... WITH SCHEMA extensions`,
-- the functions their own migrations put there) and the request roles may use it (an extension's
-- functions in a column default or a policy). Without the schema (a cluster without pgcrypto,
-- or a database that had pgcrypto elsewhere) nothing happens.
DO $do$
DECLARE
  anon  text := current_setting('gatehouse.role_anon');
  auth  text := current_setting('gatehouse.role_auth');
  svc   text := current_setting('gatehouse.role_svc');
  owner text := current_setting('gatehouse.role_owner');
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'extensions') THEN
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA extensions TO %I', owner);
    EXECUTE format('GRANT USAGE ON SCHEMA extensions TO %I, %I, %I', anon, auth, svc);
  END IF;
END
$do$;
