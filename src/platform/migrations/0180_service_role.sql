-- 0180_service_role: `service_role` is a cluster-wide group role as `anon` and `authenticated`
-- are, and this database's svc role (the secret key's) is a member that inherits its
-- privileges, so what Supabase migrations write applies as written:
--   GRANT ALL ON public.todos TO anon, authenticated, service_role;
-- The group is made as Supabase makes it (NOLOGIN NOINHERIT BYPASSRLS); the svc role keeps
-- its own BYPASSRLS (attributes are never inherited). Provisioning does the same for new
-- databases; this brings databases provisioned before it along. Runs as the cluster admin;
-- the svc role's name comes from gatehouse.role_svc (set by the runner).
DO $do$
DECLARE
  svc text := pg_catalog.current_setting('gatehouse.role_svc');
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = 'service_role') THEN
    BEGIN
      CREATE ROLE service_role NOLOGIN NOINHERIT BYPASSRLS;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- another database's migration made it meanwhile
    END;
  END IF;
  EXECUTE pg_catalog.format('ALTER ROLE %I INHERIT', svc);
  EXECUTE pg_catalog.format('GRANT service_role TO %I', svc);
END
$do$;
