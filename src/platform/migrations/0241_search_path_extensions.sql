-- 0241_search_path_extensions: the database's search_path is `"$user", public, extensions`, as a
-- Supabase project's is, so what the owner writes (a migration, psql) finds the functions of an
-- extension created `WITH SCHEMA extensions` unqualified: `uuid_generate_v4()`, `crypt(...,
-- gen_salt('bf'))`, `gin_trgm_ops`. A database-wide search_path the owner set already is kept.
-- The engines' logins keep their pinned search_path (0010); the REST engine puts each request's
-- own path (the request's schema, then rest.extra_search_path).
DO $do$
BEGIN
  IF NOT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_db_role_setting s
    JOIN pg_catalog.pg_database d ON d.oid = s.setdatabase
    WHERE d.datname = pg_catalog.current_database()
      AND s.setrole = 0
      AND EXISTS (SELECT 1 FROM pg_catalog.unnest(s.setconfig) c WHERE c LIKE 'search\_path=%')
  ) THEN
    EXECUTE pg_catalog.format(
      'ALTER DATABASE %I SET search_path TO "$user", public, extensions',
      pg_catalog.current_database()
    );
  END IF;
END
$do$;
