-- 0280_auth_hook_role: a database's Postgres-function auth hooks run under a role of their own,
-- `<tenant id>_hook` (NOLOGIN), never as the auth engine's login that owns the `auth` schema
-- (docs/auth-hooks.md "Privileges"). That role holds what the owner gives it:
--   * platform.grant_hook(...), redefined here to grant to the hook role instead of the login;
--   * anything granted to `supabase_auth_admin`, a cluster-wide group role as `anon` and
--     `service_role` are, of which the hook role is a member: Supabase's hook SQL (`grant ...
--     to supabase_auth_admin`, policies `to supabase_auth_admin`) applies as written. Other
--     databases' hook roles are members too, but cannot connect here (no login, no CONNECT).
-- The engine calls platform.call_hook(schema, function, event, max_bytes): SECURITY DEFINER
-- owned by the hook role, so the hook runs with the hook role's privileges only, and cannot
-- SET ROLE back to the engine's login (Postgres refuses role changes inside a security-definer
-- function). It answers the hook's result as text, refused (SQLSTATE GH413) when longer than
-- max_bytes, so an oversized answer never leaves Postgres. The hook role may run no DDL (an
-- event trigger refuses it): it cannot alter or drop the function it owns, nor grant anything.
-- Grants made by platform.grant_hook before this migration (to the engine's login) are given
-- to the hook role too, so existing hooks keep working. Runs as the cluster admin.
DO $do$
DECLARE
  owner text := pg_catalog.current_setting('gatehouse.role_owner');
  authn text := pg_catalog.current_setting('gatehouse.role_authn');
  hook text := pg_catalog.regexp_replace(pg_catalog.current_setting('gatehouse.role_authn'), '_authn$', '_hook');
  item record;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = 'supabase_auth_admin') THEN
    BEGIN
      CREATE ROLE supabase_auth_admin NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- another database's migration made it meanwhile
    END;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = hook) THEN
    EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN INHERIT', hook);
  END IF;
  EXECUTE pg_catalog.format('GRANT supabase_auth_admin TO %I', hook);

  -- What grant_hook gave the engine's login on the owner's objects, the hook role gets too.
  FOR item IN
    SELECT pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %I', p.oid::regprocedure, hook) AS stmt
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
     WHERE p.proowner = owner::regrole AND a.grantee = authn::regrole AND a.privilege_type = 'EXECUTE'
    UNION ALL
    SELECT pg_catalog.format('GRANT %s ON TABLE %s TO %I', a.privilege_type, c.oid::regclass, hook)
      FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
     WHERE c.relowner = owner::regrole AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND a.grantee = authn::regrole
    UNION ALL
    SELECT pg_catalog.format('GRANT USAGE ON SCHEMA %I TO %I', n.nspname, hook)
      FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
     WHERE n.nspowner = owner::regrole AND a.grantee = authn::regrole AND a.privilege_type = 'USAGE'
  LOOP
    EXECUTE item.stmt;
  END LOOP;

  EXECUTE pg_catalog.format($sql$
CREATE FUNCTION platform.call_hook(schema_name text, function_name text, event jsonb, max_bytes integer) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
  answer text;
BEGIN
  EXECUTE pg_catalog.format('SELECT %%I.%%I($1)::text', schema_name, function_name) INTO answer USING event;
  IF pg_catalog.octet_length(answer) > max_bytes THEN
    RAISE EXCEPTION 'the hook answered %% bytes, more than %%', pg_catalog.octet_length(answer), max_bytes
      USING ERRCODE = 'GH413';
  END IF;
  RETURN answer;
END
$body$;
ALTER FUNCTION platform.call_hook(text, text, jsonb, integer) OWNER TO %1$I;
REVOKE ALL ON FUNCTION platform.call_hook(text, text, jsonb, integer) FROM PUBLIC;
GRANT USAGE ON SCHEMA platform TO %2$I;
GRANT EXECUTE ON FUNCTION platform.call_hook(text, text, jsonb, integer) TO %2$I;

CREATE FUNCTION platform.refuse_hook_ddl() RETURNS event_trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
  IF current_user = %1$L THEN
    RAISE EXCEPTION 'an auth hook may not run %%', tg_tag USING ERRCODE = '42501';
  END IF;
END
$body$;
REVOKE ALL ON FUNCTION platform.refuse_hook_ddl() FROM PUBLIC;
CREATE EVENT TRIGGER gatehouse_refuse_hook_ddl ON ddl_command_start EXECUTE FUNCTION platform.refuse_hook_ddl();
$sql$, hook, authn);

  EXECUTE pg_catalog.format($sql$
CREATE OR REPLACE FUNCTION platform.grant_hook(fn regprocedure) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
  target name := %1$L;
  f record;
  stmt text;
BEGIN
  IF fn IS NULL THEN RAISE EXCEPTION 'a function is required' USING ERRCODE = '22023'; END IF;
  SELECT n.nspname, p.proowner INTO f FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = fn;
  IF NOT pg_has_role(current_user, f.proowner, 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of function %%', fn USING ERRCODE = '42501';
  END IF;
  stmt := format('REVOKE EXECUTE ON FUNCTION %%s FROM PUBLIC; GRANT USAGE ON SCHEMA %%I TO %%I; GRANT EXECUTE ON FUNCTION %%s TO %%I',
    fn, f.nspname, target, fn, target);
  EXECUTE stmt;
  RETURN stmt;
END
$body$;

CREATE OR REPLACE FUNCTION platform.grant_hook(privileges text, tbl regclass) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
  item text;
  privs text[] := '{}';
  target name := %1$L;
  rel record;
  stmt text;
BEGIN
  IF privileges IS NULL OR tbl IS NULL THEN RAISE EXCEPTION 'privileges and table are required' USING ERRCODE = '22023'; END IF;
  FOREACH item IN ARRAY regexp_split_to_array(btrim(privileges), '\s*,\s*') LOOP
    item := upper(btrim(item));
    IF item NOT IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE') THEN
      RAISE EXCEPTION 'invalid privilege %%', quote_literal(item) USING ERRCODE = '22023',
        HINT = 'use a comma-separated list of SELECT, INSERT, UPDATE or DELETE';
    END IF;
    IF NOT item = ANY (privs) THEN privs := privs || item; END IF;
  END LOOP;
  SELECT n.nspname, c.relname, c.relkind, c.relowner INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
  IF rel.relkind NOT IN ('r', 'p', 'v', 'm', 'f') THEN RAISE EXCEPTION '%% is not a table or view', tbl USING ERRCODE = '42809'; END IF;
  IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table %%', tbl USING ERRCODE = '42501';
  END IF;
  stmt := format('GRANT USAGE ON SCHEMA %%I TO %%I; GRANT %%s ON TABLE %%I.%%I TO %%I',
    rel.nspname, target, array_to_string(privs, ', '), rel.nspname, rel.relname, target);
  EXECUTE stmt;
  RETURN stmt;
END
$body$;
$sql$, hook);
END
$do$;
