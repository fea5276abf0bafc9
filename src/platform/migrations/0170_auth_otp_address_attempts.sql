-- 0170_auth_otp_address_attempts: codes entered for each address (the address a code was
-- mailed to), counted across the address's codes in a window (docs/edge.md): a new code
-- does not give a guesser five fresh tries, and guesses spread over many client IPs or
-- many new codes gain nothing. Only 6-digit codes count; a mailed link (its token hash)
-- never does. Not a GoTrue table: a real GoTrue taking over ignores it. Owned by the
-- engine login, created under SET LOCAL ROLE of it.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TABLE auth.gatehouse_otp_address_attempts (
  address        text        PRIMARY KEY,
  window_started timestamptz NOT NULL,
  attempts       integer     NOT NULL
);
ALTER TABLE auth.gatehouse_otp_address_attempts ENABLE ROW LEVEL SECURITY;

RESET ROLE;
