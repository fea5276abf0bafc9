-- 0282_auth_hook_session_state: nothing a hook leaves in the session outlives its call. A hook
-- runs on the auth engine's own connection, and some session state is not undone by a
-- function's SET clause or by a rolled-back transaction:
--   * prepared statements: a hook could DEALLOCATE one of the engine's and PREPARE its own
--     under the same name, which the engine's login would then run with its own privileges.
--     platform.call_hook compares the session's prepared statements before and after the
--     hook; on any change it deallocates them all and fails the call (SQLSTATE GH426), and
--     the engine forgets what its driver had prepared on that connection;
--   * settings: a plain SET (search_path, statement_timeout, ...) persists after the function
--     exits. RESET ALL puts every setting back to the session's default (the login's pinned
--     search_path among them, migration 0010); the engine sets none of its own at session level.
CREATE OR REPLACE FUNCTION platform.call_hook(schema_name text, function_name text, event jsonb, max_bytes integer)
  RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  answer text;
  prepared text;
BEGIN
  SELECT pg_catalog.string_agg(p.name || ' ' || p.prepare_time::text || ' ' || p.from_sql::text, ',' ORDER BY p.name)
    INTO prepared FROM pg_catalog.pg_prepared_statements p;
  EXECUTE pg_catalog.format('SELECT %I.%I($1)::text', schema_name, function_name) INTO answer USING event;
  RESET ALL;
  IF (SELECT pg_catalog.string_agg(p.name || ' ' || p.prepare_time::text || ' ' || p.from_sql::text, ',' ORDER BY p.name)
        FROM pg_catalog.pg_prepared_statements p) IS DISTINCT FROM prepared THEN
    EXECUTE 'DEALLOCATE ALL';
    RAISE EXCEPTION 'an auth hook may not prepare or deallocate statements' USING ERRCODE = 'GH426';
  END IF;
  IF pg_catalog.octet_length(answer) > max_bytes THEN
    RAISE EXCEPTION 'the hook answered % bytes, more than %', pg_catalog.octet_length(answer), max_bytes
      USING ERRCODE = 'GH413';
  END IF;
  RETURN answer;
END
$fn$;
