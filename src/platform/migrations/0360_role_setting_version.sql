-- 0360_role_setting_version: platform.set_role_setting moves the schema version too, as DDL
-- does (0160). Its NOTIFY pgrst, 'reload config' reaches only the connections listening at
-- that moment: a tenant whose connections were all closed (idle, or the one that read the
-- catalogs, closed after its request) would keep serving the old settings. Every request's
-- transaction reads the version, so a change is seen by the next request on any connection.

CREATE OR REPLACE FUNCTION platform.set_role_setting(kind text, setting text, value text) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  allowed constant text[] := ARRAY['statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout',
    'default_transaction_isolation', 'work_mem'];
  target name;
  param text := pg_catalog.lower(pg_catalog.btrim(setting));
  cap text;
  stmt text;
BEGIN
  target := platform.role(kind);
  IF param IS NULL OR NOT param = ANY (allowed) THEN
    RAISE EXCEPTION 'setting % cannot be set on a request role', coalesce(pg_catalog.quote_literal(setting), 'NULL')
      USING ERRCODE = '22023', HINT = 'use one of ' || pg_catalog.array_to_string(allowed, ', ');
  END IF;
  cap := platform.role_setting_over_cap(param, value);
  IF cap IS NOT NULL THEN
    RAISE EXCEPTION '% = % is above the cap of % for a request role', param, pg_catalog.quote_literal(value), cap
      USING ERRCODE = '22023',
        HINT = 'request roles share the cluster: statement_timeout, lock_timeout and idle_in_transaction_session_timeout '
          || 'are capped at 10min (0, no limit, is above the cap), work_mem at 256MB';
  END IF;
  IF value IS NULL THEN
    stmt := pg_catalog.format('ALTER ROLE %I RESET %I', target, param);
  ELSE
    stmt := pg_catalog.format('ALTER ROLE %I SET %I = %L', target, param, value);
  END IF;
  EXECUTE stmt;
  PERFORM pg_catalog.pg_notify('pgrst', 'reload config');
  -- As DDL does (0160): the schema version moves when this transaction commits.
  INSERT INTO platform.schema_changes (xid) VALUES (pg_catalog.pg_current_xact_id()) ON CONFLICT DO NOTHING;
  RETURN stmt;
END
$fn$;
