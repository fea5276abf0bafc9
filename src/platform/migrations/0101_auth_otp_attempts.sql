-- 0101_auth_otp_attempts: codes entered against each one-time token (auth.one_time_tokens),
-- so that a code stops working after 5 tries with a wrong code, whatever the number of
-- client IPs (the auth engine's own rule; GoTrue has none). The row goes with its token:
-- a new code (a new token row) starts at 0. Not a GoTrue table: a real GoTrue taking over
-- ignores it. Owned by the engine login, created under SET LOCAL ROLE of it.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TABLE auth.gatehouse_otp_attempts (
  token_id uuid    PRIMARY KEY REFERENCES auth.one_time_tokens (id) ON DELETE CASCADE,
  attempts integer NOT NULL
);
ALTER TABLE auth.gatehouse_otp_attempts ENABLE ROW LEVEL SECURITY;

RESET ROLE;
