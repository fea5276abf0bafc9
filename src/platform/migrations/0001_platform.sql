-- 0001_platform: the `platform` schema helpers (platform.role, platform.grant), the
-- ownership and privileges of `public`, and the DDL event trigger that tells the REST
-- engine to reload its schema cache. Runs as the cluster admin. No tenant name appears
-- here: the runner sets gatehouse.role_<kind> from platform.roles for this transaction.

-- platform.role(kind): this database's request role of kind 'anon' | 'auth' | 'svc'.
CREATE FUNCTION platform.role(kind text) RETURNS name
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  found name;
BEGIN
  IF kind IS NULL OR kind NOT IN ('anon', 'auth', 'svc') THEN
    RAISE EXCEPTION 'unknown role kind %', coalesce(quote_literal(kind), 'NULL')
      USING ERRCODE = '22023', HINT = 'use one of ''anon'', ''auth'', ''svc''';
  END IF;
  SELECT r.role_name INTO found FROM platform.roles r WHERE r.kind = role.kind;
  IF found IS NULL THEN
    RAISE EXCEPTION 'no role of kind % is registered in this database', kind USING ERRCODE = '55000';
  END IF;
  RETURN found;
END
$fn$;

COMMENT ON FUNCTION platform.role(text) IS
  'The role of this database for kind anon, auth or svc. Role names differ per database: never pattern-match pg_roles.';

-- platform.grant(privileges, table, kind): GRANT cannot take a function call as grantee,
-- so this runs it: validates the privilege list, quotes every identifier, and refuses a
-- table the caller does not own (a plain GRANT would only warn and grant nothing).
CREATE FUNCTION platform.grant(privileges text, tbl regclass, kind text) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  item text;
  privs text[] := '{}';
  target name;
  rel record;
  stmt text;
BEGIN
  IF privileges IS NULL OR tbl IS NULL THEN
    RAISE EXCEPTION 'privileges and table are required' USING ERRCODE = '22023';
  END IF;
  target := platform.role(kind);
  FOREACH item IN ARRAY regexp_split_to_array(btrim(privileges), '\s*,\s*') LOOP
    item := regexp_replace(upper(btrim(item)), '\s+', ' ', 'g');
    IF item = 'ALL PRIVILEGES' THEN item := 'ALL'; END IF;
    IF item NOT IN ('SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER', 'ALL') THEN
      RAISE EXCEPTION 'invalid privilege %', quote_literal(item) USING ERRCODE = '22023',
        HINT = 'use a comma-separated list of SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER or ALL';
    END IF;
    IF NOT item = ANY (privs) THEN privs := privs || item; END IF;
  END LOOP;
  SELECT n.nspname, c.relname, c.relkind, c.relowner INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
  IF rel.relkind NOT IN ('r', 'p', 'v', 'm', 'f') THEN
    RAISE EXCEPTION '% is not a table or view', tbl USING ERRCODE = '42809';
  END IF;
  IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = '42501';
  END IF;
  stmt := format('GRANT %s ON TABLE %I.%I TO %I', array_to_string(privs, ', '), rel.nspname, rel.relname, target);
  EXECUTE stmt;
  RETURN stmt;
END
$fn$;

COMMENT ON FUNCTION platform.grant(text, regclass, text) IS
  'GRANT <privileges> ON <table> TO platform.role(<kind>); returns the statement it ran.';

-- The DDL event trigger: PostgREST's convention for schema cache reloads.
CREATE FUNCTION platform.notify_schema_reload() RETURNS event_trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  PERFORM pg_notify('pgrst', 'reload schema');
END
$fn$;

CREATE EVENT TRIGGER gatehouse_reload_schema_ddl ON ddl_command_end
  EXECUTE FUNCTION platform.notify_schema_reload();
CREATE EVENT TRIGGER gatehouse_reload_schema_drop ON sql_drop
  EXECUTE FUNCTION platform.notify_schema_reload();

-- Privileges. Functions are executable only by the roles named below.
REVOKE ALL ON FUNCTION platform.role(text), platform.grant(text, regclass, text),
  platform.notify_schema_reload() FROM PUBLIC;

DO $do$
DECLARE
  anon  text := current_setting('gatehouse.role_anon');
  auth  text := current_setting('gatehouse.role_auth');
  svc   text := current_setting('gatehouse.role_svc');
  owner text := current_setting('gatehouse.role_owner');
BEGIN
  -- platform: the owner and the request roles may call platform.role(); only the owner
  -- calls platform.grant(), which runs as the owner so it can grant on the owner's tables.
  EXECUTE format('GRANT USAGE ON SCHEMA platform TO %I, %I, %I, %I', owner, anon, auth, svc);
  EXECUTE format('GRANT EXECUTE ON FUNCTION platform.role(text) TO %I, %I, %I, %I', owner, anon, auth, svc);
  EXECUTE format('GRANT EXECUTE ON FUNCTION platform.grant(text, regclass, text) TO %I', owner);
  EXECUTE format('ALTER FUNCTION platform.grant(text, regclass, text) OWNER TO %I', owner);

  -- public: owned by the customer; nobody else creates in it; request roles may look in
  -- (USAGE) but get no table grants: a fresh database exposes zero tables.
  EXECUTE format('ALTER SCHEMA public OWNER TO %I', owner);
  REVOKE ALL ON SCHEMA public FROM PUBLIC;
  EXECUTE format('GRANT USAGE ON SCHEMA public TO %I, %I, %I', anon, auth, svc);

  -- The secret key's role reaches whatever the owner creates in public (RLS bypassed by
  -- BYPASSRLS, grants by these defaults).
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public GRANT ALL ON TABLES TO %I', owner, svc);
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public GRANT ALL ON SEQUENCES TO %I', owner, svc);
  EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public GRANT EXECUTE ON FUNCTIONS TO %I', owner, svc);
END
$do$;
