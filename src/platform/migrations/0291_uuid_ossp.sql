-- 0291_uuid_ossp: uuid-ossp in the schema `extensions` beside pgcrypto, as every Supabase
-- project has it (migrations call extensions.uuid_generate_v4(), or uuid_generate_v4() through
-- the database's search_path, 0241). Unless the database has it already (in any schema); a
-- cluster without the contrib module only gets a notice (docs/supabase.md lists what the
-- development cluster has).
DO $do$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'uuid-ossp') THEN
    BEGIN
      CREATE SCHEMA IF NOT EXISTS extensions;
      CREATE EXTENSION "uuid-ossp" WITH SCHEMA extensions;
    EXCEPTION WHEN OTHERS THEN
      RAISE NOTICE 'uuid-ossp is not available (%)', SQLERRM;
    END;
  END IF;
END
$do$;
