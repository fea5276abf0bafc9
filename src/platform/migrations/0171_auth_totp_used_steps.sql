-- 0171_auth_totp_used_steps: the last TOTP time step each factor verified with, so that a
-- code that verified is refused for the rest of its window (RFC 6238 section 5.2: a
-- verifier must not accept the second attempt of an OTP after the first succeeded; GoTrue
-- accepts it again). Not a GoTrue table: a real GoTrue taking over ignores it. Owned by the
-- engine login, created under SET LOCAL ROLE of it.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TABLE auth.gatehouse_totp_used_steps (
  factor_id uuid   PRIMARY KEY REFERENCES auth.mfa_factors (id) ON DELETE CASCADE,
  last_step bigint NOT NULL
);
ALTER TABLE auth.gatehouse_totp_used_steps ENABLE ROW LEVEL SECURITY;

RESET ROLE;
