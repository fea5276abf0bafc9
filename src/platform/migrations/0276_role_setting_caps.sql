-- 0276_role_setting_caps: platform.set_role_setting (0270) caps what the owner may give this
-- database's request roles, since their settings are spent on the cluster every database shares
-- (docs/security.md "The tenant boundary"; docs/supabase.md): statement_timeout, lock_timeout and
-- idle_in_transaction_session_timeout at most 10min (0, no limit, is above the cap), work_mem at
-- most 256MB. A value above its cap is refused with SQLSTATE 22023 naming the cap. Values are
-- read by Postgres itself (a trial set_config in a subtransaction, rolled back), so every unit
-- and spelling Postgres takes is judged in its base unit. Settings above the caps that were set
-- before this migration are reset.

-- The cap a setting's value is above ('10min', '256MB'), or NULL when it is within its cap or has
-- none. Raises 22023 for a value Postgres refuses.
CREATE FUNCTION platform.role_setting_over_cap(param text, value text) RETURNS text
  LANGUAGE plpgsql VOLATILE
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  caps constant jsonb := '{"statement_timeout": [600000, "10min"], "lock_timeout": [600000, "10min"],
    "idle_in_transaction_session_timeout": [600000, "10min"], "work_mem": [262144, "256MB"]}';
  cap jsonb := caps -> param;
  base numeric;
BEGIN
  IF cap IS NULL OR value IS NULL THEN
    RETURN NULL;
  END IF;
  BEGIN
    PERFORM pg_catalog.set_config(param, value, true);
    SELECT s.setting::numeric INTO base FROM pg_catalog.pg_settings s WHERE s.name = param;
    RAISE SQLSTATE 'GH276';  -- rolls the trial setting back; base keeps its value
  EXCEPTION WHEN SQLSTATE 'GH276' THEN
    NULL;
  END;
  IF base > (cap ->> 0)::numeric OR (base = 0 AND param <> 'work_mem') THEN
    RETURN cap ->> 1;
  END IF;
  RETURN NULL;
END
$fn$;

REVOKE ALL ON FUNCTION platform.role_setting_over_cap(text, text) FROM PUBLIC;

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
  RETURN stmt;
END
$fn$;

COMMENT ON FUNCTION platform.set_role_setting(text, text, text) IS
  'ALTER ROLE platform.role(<kind>) SET <setting> = <value> (RESET when value is NULL) for statement_timeout, lock_timeout, idle_in_transaction_session_timeout (each at most 10min, not 0), default_transaction_isolation, work_mem (at most 256MB); returns the statement it ran.';

-- Settings above the caps that this database's request roles already have (for all databases,
-- as set_role_setting sets them) are reset.
DO $do$
DECLARE
  r record;
BEGIN
  FOR r IN
    SELECT s.setrole::regrole::text AS role, pg_catalog.split_part(c, '=', 1) AS param,
      pg_catalog.substr(c, pg_catalog.strpos(c, '=') + 1) AS value
    FROM pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) AS c
    WHERE s.setdatabase = 0 AND s.setrole IN (SELECT a.oid FROM pg_catalog.pg_roles a
      JOIN platform.roles p ON p.role_name = a.rolname WHERE p.kind IN ('anon', 'auth', 'svc'))
  LOOP
    IF platform.role_setting_over_cap(r.param, r.value) IS NOT NULL THEN
      EXECUTE pg_catalog.format('ALTER ROLE %s RESET %I', r.role, r.param);
    END IF;
  END LOOP;
END
$do$;
