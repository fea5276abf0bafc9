-- 0270_role_settings: platform.set_role_setting(kind, setting, value), the owner's way to give
-- this database's request roles settings of their own, as Supabase users write
--   alter role authenticated set statement_timeout = '8s';
-- The REST engine applies a request role's settings to every request run as it (as PostgREST
-- 12 and later do; docs/rest-protocol.md §6.2). The owner cannot run ALTER ROLE ... SET on
-- the request roles itself: that takes superuser, or CREATEROLE and (PostgreSQL 16 and
-- later) ADMIN OPTION on the role, which the owner has not (and `authenticated` is a
-- cluster-wide group role, shared with other databases). So this function runs it: SECURITY
-- DEFINER as the cluster admin that runs the migrations, for this database's three request
-- roles only (platform.role), for the listed settings only, every name and value quoted; a
-- NULL value resets the setting. It sends NOTIFY pgrst, 'reload config' (at commit), so the
-- REST engine (or a PostgREST) reads the settings again. Only the owner may call it.
CREATE FUNCTION platform.set_role_setting(kind text, setting text, value text) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  allowed constant text[] := ARRAY['statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout',
    'default_transaction_isolation', 'work_mem'];
  target name;
  param text := pg_catalog.lower(pg_catalog.btrim(setting));
  stmt text;
BEGIN
  target := platform.role(kind);
  IF param IS NULL OR NOT param = ANY (allowed) THEN
    RAISE EXCEPTION 'setting % cannot be set on a request role', coalesce(pg_catalog.quote_literal(setting), 'NULL')
      USING ERRCODE = '22023', HINT = 'use one of ' || pg_catalog.array_to_string(allowed, ', ');
  END IF;
  IF value IS NULL THEN
    stmt := pg_catalog.format('ALTER ROLE %I RESET %I', target, param);
  ELSE
    stmt := pg_catalog.format('ALTER ROLE %I SET %I = %L', target, param, value);
  END IF;
  EXECUTE stmt;
  PERFORM pg_catalog.pg_notify('pgrst', 'reload config');
  RETURN stmt;
END
$fn$;

COMMENT ON FUNCTION platform.set_role_setting(text, text, text) IS
  'ALTER ROLE platform.role(<kind>) SET <setting> = <value> (RESET when value is NULL) for statement_timeout, lock_timeout, idle_in_transaction_session_timeout, default_transaction_isolation, work_mem; returns the statement it ran.';

REVOKE ALL ON FUNCTION platform.set_role_setting(text, text, text) FROM PUBLIC;

DO $do$
BEGIN
  EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION platform.set_role_setting(text, text, text) TO %I',
    pg_catalog.current_setting('gatehouse.role_owner'));
END
$do$;
