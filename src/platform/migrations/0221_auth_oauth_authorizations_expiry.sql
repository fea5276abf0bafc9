-- 0221_auth_oauth_authorizations_expiry: an index on the expiry of every OAuth authorization
-- request, whatever its status, so the auth engine can delete requests that expired a day ago
-- (decided or not) as it stores a new one (models/oauth-authorizations.ts,
-- docs/auth-protocol.md §3.22). GoTrue's own index covers pending requests only.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE INDEX oauth_authorizations_expires_at_idx ON auth.oauth_authorizations (expires_at);

RESET ROLE;
