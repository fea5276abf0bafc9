-- 0150_auth_email_proofs: which addresses each user has proven to own by a mail round trip (a
-- token sent to the address and verified: sign-up confirmation, magic link, recovery,
-- email change, e-mail OTP). Auto-confirmation (mail confirmation off) proves nothing, so
-- it writes no row. The panel exchange links a panel member only to a user whose address
-- is proven here. Owned by the auth engine login, like the rest of `auth`.

DO $do$
BEGIN
  EXECUTE pg_catalog.format('SET LOCAL ROLE %I', pg_catalog.current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TABLE auth.gatehouse_email_proofs (
  user_id   uuid        NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  address   text        NOT NULL,
  proven_at timestamptz NOT NULL,
  PRIMARY KEY (user_id, address)
);
ALTER TABLE auth.gatehouse_email_proofs ENABLE ROW LEVEL SECURITY;

RESET ROLE;
