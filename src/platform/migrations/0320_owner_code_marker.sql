-- 0320_owner_code_marker: code of the database's owner that runs inside the auth engine's
-- statements does not change the engine's session (docs/security.md "The tenant boundary").
-- Since 0290 the owner puts triggers on auth tables (SECURITY DEFINER, so they run as the
-- owner), and a foreign key from the owner's table to an auth table runs the owner's triggers,
-- rules and defaults on that table when the engine deletes a user. That code runs on the
-- engine's pooled connection, where a plain SET (or set_config(..., false)) outlives the
-- function even when it has a SET clause of its own, and PREPARE/DEALLOCATE outlive even a
-- rolled-back transaction: the engine's next statements, as the login that owns `auth`, would
-- resolve the owner's operators and functions or run the owner's statement.
--
-- Postgres cannot forbid that, so the engine is told when it may have happened: every auth
-- table the owner's code can reach gets the statement trigger "!gatehouse_owner_code", which
-- sends the notice GH427 before any other trigger of the statement fires (BEFORE STATEMENT
-- triggers fire first, by name; the owner's may not sort before it). The engine, on that
-- notice, puts its session back before its next statement (RESET ALL, and its prepared
-- statements deallocated when any of them changed) and again once the transaction ended,
-- which covers deferred triggers firing at COMMIT. Tables the owner's code cannot reach keep
-- no marker and cost nothing.

CREATE FUNCTION platform.owner_code_notice() RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  SET client_min_messages = notice
AS $fn$
BEGIN
  RAISE NOTICE 'code of the database owner may run in this statement' USING ERRCODE = 'GH427';
  RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION platform.owner_code_notice() FROM PUBLIC;

-- Adds the marker to every auth table with a trigger whose function another role than the
-- table's owner wrote, or that a table outside `auth` references. Idempotent; markers stay.
CREATE FUNCTION platform.mark_owner_code() RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  rel regclass;
BEGIN
  IF to_regnamespace('auth') IS NULL THEN RETURN; END IF;
  FOR rel IN
    SELECT c.oid::regclass FROM pg_class c
     WHERE c.relnamespace = 'auth'::regnamespace AND c.relkind IN ('r', 'p')
       AND NOT EXISTS (SELECT 1 FROM pg_trigger m WHERE m.tgrelid = c.oid AND m.tgname = '!gatehouse_owner_code')
       AND (EXISTS (SELECT 1 FROM pg_trigger o JOIN pg_proc p ON p.oid = o.tgfoid
                     WHERE o.tgrelid = c.oid AND NOT o.tgisinternal AND p.proowner <> c.relowner)
         OR EXISTS (SELECT 1 FROM pg_constraint f JOIN pg_class r ON r.oid = f.conrelid
                     WHERE f.contype = 'f' AND f.confrelid = c.oid AND r.relnamespace <> 'auth'::regnamespace))
  LOOP
    EXECUTE format('CREATE TRIGGER "!gatehouse_owner_code" BEFORE INSERT OR UPDATE OR DELETE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION platform.owner_code_notice()', rel);
  END LOOP;
END
$fn$;
-- Called by the event trigger below as the role running the DDL (the owner); it only adds markers.
GRANT EXECUTE ON FUNCTION platform.mark_owner_code() TO PUBLIC;

CREATE FUNCTION platform.mark_owner_code_on_ddl() RETURNS event_trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  PERFORM platform.mark_owner_code();
END
$fn$;
REVOKE ALL ON FUNCTION platform.mark_owner_code_on_ddl() FROM PUBLIC;

CREATE EVENT TRIGGER gatehouse_owner_code ON ddl_command_end
  WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE')
  EXECUTE FUNCTION platform.mark_owner_code_on_ddl();

-- 0290's check, with the marker's own function let through, and the owner's BEFORE STATEMENT
-- triggers on auth tables kept from sorting before the marker.
CREATE OR REPLACE FUNCTION platform.check_auth_triggers() RETURNS event_trigger
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
     AND p.oid <> 'platform.owner_code_notice()'::regprocedure
     AND pn.nspname NOT IN ('pg_catalog', 'information_schema')
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'trigger % on auth.% calls %, which is not SECURITY DEFINER', bad.tgname, bad.relname, bad.fn
      USING ERRCODE = '42501',
        DETAIL = 'A trigger on an auth table fires inside the auth server''s own transaction; its function would run with the auth server''s privileges.',
        HINT = 'Declare the function SECURITY DEFINER (and SET search_path = ''''), as Supabase''s examples do.';
  END IF;
  SELECT t.tgname, c.relname INTO bad
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = 'auth'::regnamespace AND NOT t.tgisinternal
     AND t.tgtype::integer & 3 = 2 -- BEFORE, FOR EACH STATEMENT
     AND t.tgname < '!gatehouse_owner_code'::name
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'trigger % on auth.% would fire before the platform''s own', bad.tgname, bad.relname
      USING ERRCODE = '42501',
        HINT = 'Name a BEFORE ... FOR EACH STATEMENT trigger on an auth table so that it sorts after "!gatehouse_owner_code".';
  END IF;
END
$fn$;

SELECT platform.mark_owner_code();
