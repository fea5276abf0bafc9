-- 0100_auth_engine: the auth engine's own bookkeeping beside GoTrue's tables: mail sends,
-- counted for the tenant's mail limits (auth.mail_rate_per_hour per tenant and
-- auth.mail_min_interval per address and kind). Not a GoTrue table: a real GoTrue taking
-- over ignores it. Owned by the engine login, created under SET LOCAL ROLE of it.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TABLE auth.gatehouse_mail_sends (
  id      bigserial   PRIMARY KEY,
  address text        NOT NULL,
  kind    text        NOT NULL,
  sent_at timestamptz NOT NULL
);
CREATE INDEX gatehouse_mail_sends_sent_at_idx ON auth.gatehouse_mail_sends (sent_at);
CREATE INDEX gatehouse_mail_sends_address_kind_idx ON auth.gatehouse_mail_sends (address, kind, sent_at DESC);
ALTER TABLE auth.gatehouse_mail_sends ENABLE ROW LEVEL SECURITY;

RESET ROLE;
