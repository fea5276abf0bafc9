-- 0190_auth_hooks: what the owner runs to let the auth engine call a Postgres auth hook
-- (GoTrue's pg-functions:// hooks run as the auth server's login; ours as the auth engine's
-- login, whose name differs per database and cannot be written in a GRANT).
--   platform.grant_hook('public.custom_claims(jsonb)')         EXECUTE on the function (PUBLIC loses it)
--   platform.grant_hook('SELECT', 'public.user_roles')         table privileges the hook's body needs
-- Both grant USAGE on the object's schema too, refuse objects the caller does not own, and
-- return the statements they ran. They run as the owner (SECURITY DEFINER), like platform.grant; the
-- login's name is written into them when this migration runs in the database.
DO $do$
DECLARE
  owner text := current_setting('gatehouse.role_owner');
  authn text := current_setting('gatehouse.role_authn');
BEGIN
  EXECUTE format($sql$
CREATE OR REPLACE FUNCTION platform.grant_hook(fn regprocedure) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
  target name;
  f record;
  stmt text;
BEGIN
  IF fn IS NULL THEN RAISE EXCEPTION 'a function is required' USING ERRCODE = '22023'; END IF;
  target := %L;
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
$sql$, authn);
  EXECUTE format($sql$
CREATE OR REPLACE FUNCTION platform.grant_hook(privileges text, tbl regclass) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
  item text;
  privs text[] := '{}';
  target name;
  rel record;
  stmt text;
BEGIN
  IF privileges IS NULL OR tbl IS NULL THEN RAISE EXCEPTION 'privileges and table are required' USING ERRCODE = '22023'; END IF;
  target := %L;
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
$sql$, authn);
  REVOKE ALL ON FUNCTION platform.grant_hook(regprocedure), platform.grant_hook(text, regclass) FROM PUBLIC;
  EXECUTE format('GRANT EXECUTE ON FUNCTION platform.grant_hook(regprocedure), platform.grant_hook(text, regclass) TO %I', owner);
  EXECUTE format('ALTER FUNCTION platform.grant_hook(regprocedure) OWNER TO %I', owner);
  EXECUTE format('ALTER FUNCTION platform.grant_hook(text, regclass) OWNER TO %I', owner);
END
$do$;
