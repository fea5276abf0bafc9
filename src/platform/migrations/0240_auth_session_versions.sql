-- 0240_auth_session_versions: a change to what a session's refresh answers (the user's
-- identities and factors, the session's AMR claims) writes a new version of the session row,
-- so the auth engine can tell that nothing changed since it last refreshed the session by the
-- row's version alone (docs/auth-protocol.md §5.3: the one-statement refresh answers from what
-- it remembered when the session row and the users row are the versions it wrote and read).
-- The triggers only write the row again (no column changes; Postgres writes a new version of a
-- row for every UPDATE), so nothing a client or GoTrue reads changes. Created as the auth
-- engine's login, which owns the auth schema (0002).
DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

-- The trigger's argument names the column of the changed row that picks the sessions: the
-- user's (`user_id`: identities, factors) or the session's own (`session_id`: AMR claims);
-- an UPDATE that moves the row touches the sessions of both values.
CREATE FUNCTION auth.gatehouse_touch_sessions() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  was uuid := CASE WHEN TG_OP <> 'INSERT' THEN (to_jsonb(OLD) ->> TG_ARGV[0])::uuid END;
  now_ uuid := CASE WHEN TG_OP <> 'DELETE' THEN (to_jsonb(NEW) ->> TG_ARGV[0])::uuid END;
BEGIN
  IF TG_ARGV[0] = 'session_id' THEN
    UPDATE auth.sessions SET refresh_token_counter = refresh_token_counter WHERE id IN (was, now_);
  ELSE
    UPDATE auth.sessions SET refresh_token_counter = refresh_token_counter WHERE user_id IN (was, now_);
  END IF;
  RETURN NULL;
END
$fn$;

REVOKE ALL ON FUNCTION auth.gatehouse_touch_sessions() FROM PUBLIC;

CREATE TRIGGER gatehouse_session_version AFTER INSERT OR UPDATE OR DELETE ON auth.identities
  FOR EACH ROW EXECUTE FUNCTION auth.gatehouse_touch_sessions('user_id');
CREATE TRIGGER gatehouse_session_version AFTER INSERT OR UPDATE OR DELETE ON auth.mfa_factors
  FOR EACH ROW EXECUTE FUNCTION auth.gatehouse_touch_sessions('user_id');
CREATE TRIGGER gatehouse_session_version AFTER INSERT OR UPDATE OR DELETE ON auth.mfa_amr_claims
  FOR EACH ROW EXECUTE FUNCTION auth.gatehouse_touch_sessions('session_id');

COMMENT ON FUNCTION auth.gatehouse_touch_sessions() IS
  'Gatehouse: writes a new version of the sessions whose answer to a refresh a changed identity, factor or AMR claim changes (the auth engine''s refresh checks the version).';
