-- 0230_pgcrypto: pgcrypto in the schema `extensions`, where Supabase projects have it, unless
-- the database has it already (in any schema). The auth engine checks a v2 refresh token's
-- HMAC with its hmac() inside the refresh statement (docs/auth-protocol.md §5.3); without it
-- (a cluster without the contrib module) the engine builds the HMAC from sha256() instead, so
-- a failure here is only a notice. The engine's login may use the extension's schema.
DO $do$
DECLARE
  schema_name name;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pgcrypto') THEN
    BEGIN
      CREATE SCHEMA IF NOT EXISTS extensions;
      CREATE EXTENSION pgcrypto WITH SCHEMA extensions;
    EXCEPTION WHEN OTHERS THEN
      RAISE NOTICE 'pgcrypto is not available (%); v2 refresh tokens use the sha256() HMAC', SQLERRM;
    END;
  END IF;
  SELECT n.nspname INTO schema_name FROM pg_catalog.pg_extension e
    JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pgcrypto';
  IF schema_name IS NOT NULL THEN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', schema_name, current_setting('gatehouse.role_authn'));
  END IF;
END
$do$;
