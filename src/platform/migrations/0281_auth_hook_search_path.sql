-- 0281_auth_hook_search_path: platform.call_hook (0280) resets the session's search_path after
-- the hook returns. A function's `SET search_path` clause does not undo a plain `SET` (or
-- `set_config(..., false)`) run inside it: that persists after the function exits, so a hook
-- could leave `public` on the search path of the auth engine's pooled connection, and the
-- engine's next statements would resolve names in the owner's schema. RESET puts the login's
-- own pinned path back (migration 0010). The function keeps its owner, the hook role.
CREATE OR REPLACE FUNCTION platform.call_hook(schema_name text, function_name text, event jsonb, max_bytes integer)
  RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  answer text;
BEGIN
  EXECUTE pg_catalog.format('SELECT %I.%I($1)::text', schema_name, function_name) INTO answer USING event;
  RESET search_path;
  IF pg_catalog.octet_length(answer) > max_bytes THEN
    RAISE EXCEPTION 'the hook answered % bytes, more than %', pg_catalog.octet_length(answer), max_bytes
      USING ERRCODE = 'GH413';
  END IF;
  RETURN answer;
END
$fn$;
