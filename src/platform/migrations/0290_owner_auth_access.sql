-- 0290_owner_auth_access: the database's owner is to the `auth` schema what a Supabase
-- project's `postgres` role is (docs/supabase.md, "Moving a Supabase project"): it reads and
-- writes the auth tables (a members list joining auth.users, a seed inserting users), creates
-- triggers on them (the "profile row on sign-up" trigger) and references them. The tables stay
-- the auth engine login's; RLS stays on (GoTrue enables it), and a policy per table lets the
-- owner through, as Supabase's `postgres` passes by BYPASSRLS, without giving the owner that
-- attribute on every table of its database.
--
-- platform.open_auth_to_owner() does it for every table, sequence and function of `auth`; the
-- migration runner calls it after every run, so auth tables added later get the same.
--
-- A trigger the owner puts on an auth table fires inside the auth engine's transaction, as the
-- engine's login. Its function must therefore be SECURITY DEFINER (it then runs as the owner,
-- as Supabase's examples write it): platform.check_auth_triggers() refuses, at the end of the
-- DDL statement, any trigger on an auth table whose function would run with the engine's
-- privileges (created by another role than the engine login, not SECURITY DEFINER), also when
-- the function is replaced or altered afterwards.

CREATE FUNCTION platform.open_auth_to_owner() RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  owner name;
  t record;
BEGIN
  SELECT r.role_name INTO owner FROM platform.roles r WHERE r.kind = 'owner';
  IF owner IS NULL OR to_regnamespace('auth') IS NULL THEN RETURN; END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA auth TO %I', owner);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA auth TO %I', owner);
  EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA auth TO %I', owner);
  EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA auth TO %I', owner);
  FOR t IN
    SELECT c.relname FROM pg_class c
     WHERE c.relnamespace = 'auth'::regnamespace AND c.relkind IN ('r', 'p')
       AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'gatehouse_owner')
  LOOP
    EXECUTE format('CREATE POLICY gatehouse_owner ON auth.%I FOR ALL TO %I USING (true) WITH CHECK (true)', t.relname, owner);
  END LOOP;
END
$fn$;
REVOKE ALL ON FUNCTION platform.open_auth_to_owner() FROM PUBLIC;

CREATE FUNCTION platform.check_auth_triggers() RETURNS event_trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  bad record;
BEGIN
  IF to_regnamespace('auth') IS NULL THEN RETURN; END IF;
  SELECT t.tgname, c.relname, p.oid::regprocedure AS fn INTO bad
    FROM pg_trigger t
    JOIN pg_class c ON c.oid = t.tgrelid
    JOIN pg_proc p ON p.oid = t.tgfoid
    JOIN pg_namespace pn ON pn.oid = p.pronamespace
   WHERE c.relnamespace = 'auth'::regnamespace AND NOT t.tgisinternal
     AND NOT p.prosecdef
     AND p.proowner <> c.relowner
     AND pn.nspname NOT IN ('pg_catalog', 'information_schema')
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'trigger % on auth.% calls %, which is not SECURITY DEFINER', bad.tgname, bad.relname, bad.fn
      USING ERRCODE = '42501',
        DETAIL = 'A trigger on an auth table fires inside the auth server''s own transaction; its function would run with the auth server''s privileges.',
        HINT = 'Declare the function SECURITY DEFINER (and SET search_path = ''''), as Supabase''s examples do.';
  END IF;
END
$fn$;
REVOKE ALL ON FUNCTION platform.check_auth_triggers() FROM PUBLIC;

CREATE EVENT TRIGGER gatehouse_auth_triggers ON ddl_command_end
  WHEN TAG IN ('CREATE TRIGGER', 'CREATE FUNCTION', 'ALTER FUNCTION', 'ALTER TRIGGER', 'CREATE PROCEDURE', 'ALTER PROCEDURE')
  EXECUTE FUNCTION platform.check_auth_triggers();

SELECT platform.open_auth_to_owner();
