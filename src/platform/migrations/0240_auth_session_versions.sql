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

CREATE FUNCTION auth.gatehouse_touch_user_sessions() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    UPDATE auth.sessions SET refresh_token_counter = refresh_token_counter WHERE user_id = OLD.user_id;
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.user_id IS DISTINCT FROM OLD.user_id) THEN
    UPDATE auth.sessions SET refresh_token_counter = refresh_token_counter WHERE user_id = NEW.user_id;
  END IF;
  RETURN NULL;
END
$fn$;

CREATE FUNCTION auth.gatehouse_touch_session() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    UPDATE auth.sessions SET refresh_token_counter = refresh_token_counter WHERE id = OLD.session_id;
  END IF;
  IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.session_id IS DISTINCT FROM OLD.session_id) THEN
    UPDATE auth.sessions SET refresh_token_counter = refresh_token_counter WHERE id = NEW.session_id;
  END IF;
  RETURN NULL;
END
$fn$;

REVOKE ALL ON FUNCTION auth.gatehouse_touch_user_sessions(), auth.gatehouse_touch_session() FROM PUBLIC;

CREATE TRIGGER gatehouse_session_version AFTER INSERT OR UPDATE OR DELETE ON auth.identities
  FOR EACH ROW EXECUTE FUNCTION auth.gatehouse_touch_user_sessions();
CREATE TRIGGER gatehouse_session_version AFTER INSERT OR UPDATE OR DELETE ON auth.mfa_factors
  FOR EACH ROW EXECUTE FUNCTION auth.gatehouse_touch_user_sessions();
CREATE TRIGGER gatehouse_session_version AFTER INSERT OR UPDATE OR DELETE ON auth.mfa_amr_claims
  FOR EACH ROW EXECUTE FUNCTION auth.gatehouse_touch_session();

COMMENT ON FUNCTION auth.gatehouse_touch_user_sessions() IS
  'Gatehouse: writes a new version of the sessions of a user whose identities or factors changed (the auth engine''s refresh checks the version).';
COMMENT ON FUNCTION auth.gatehouse_touch_session() IS
  'Gatehouse: writes a new version of a session whose AMR claims changed (the auth engine''s refresh checks the version).';
