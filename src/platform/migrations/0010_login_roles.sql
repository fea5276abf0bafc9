-- 0010_login_roles: the logins that run our SQL get a pinned search_path, and the panel's
-- test query gets one login per request role. Runs as the cluster admin; role names come
-- from gatehouse.role_<kind> (set by the runner).
--
-- search_path: the engines' logins resolve names in pg_catalog and pg_temp only, so an
-- object the owner creates in public (say public.lower(varchar)) is never picked over the
-- built-in one and never runs with an engine's privileges. The REST engine still sets the
-- exposed schemas per request (transaction-local), as PostgREST does.
--
-- Test-query logins `<request role>_probe`: LOGIN NOINHERIT, member of exactly one request
-- role, so SET ROLE / set_config('role', ...) inside a test query cannot reach another
-- request role (Postgres checks membership of the login), and RESET ROLE drops to a login
-- that holds no privilege. Their password is the REST engine login's (its SCRAM verifier is
-- copied; the panel logs in with the engine's URL and the probe's name).
DO $do$
DECLARE
  rest  text := current_setting('gatehouse.role_rest');
  authn text := current_setting('gatehouse.role_authn');
  kind  text;
  target text;
  probe text;
  verifier text;
BEGIN
  EXECUTE pg_catalog.format('ALTER ROLE %I SET search_path = pg_catalog, pg_temp', rest);
  EXECUTE pg_catalog.format('ALTER ROLE %I SET search_path = pg_catalog, pg_temp', authn);

  SELECT a.rolpassword INTO verifier FROM pg_catalog.pg_authid a WHERE a.rolname = rest;
  IF verifier IS NOT NULL AND verifier NOT LIKE 'SCRAM-SHA-256$%' THEN
    verifier := NULL;  -- an md5 hash is salted with the role name: it cannot be reused
  END IF;
  FOREACH kind IN ARRAY ARRAY['anon', 'auth', 'svc'] LOOP
    target := pg_catalog.current_setting('gatehouse.role_' || kind);
    probe := target || '_probe';
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = probe) THEN
      EXECUTE pg_catalog.format('CREATE ROLE %I LOGIN NOINHERIT', probe);
    END IF;
    IF verifier IS NOT NULL THEN
      EXECUTE pg_catalog.format('ALTER ROLE %I PASSWORD %L', probe, verifier);
    END IF;
    EXECUTE pg_catalog.format('ALTER ROLE %I SET search_path = pg_catalog, pg_temp', probe);
    EXECUTE pg_catalog.format('GRANT %I TO %I', target, probe);
    EXECUTE pg_catalog.format('GRANT CONNECT ON DATABASE %I TO %I', pg_catalog.current_database(), probe);
  END LOOP;
END
$do$;
