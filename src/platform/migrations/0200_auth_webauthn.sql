-- 0200_auth_webauthn: GoTrue's passkey tables (supabase/auth migrations/20260302000000_add_passkeys):
-- a user's WebAuthn credentials, and the challenges of registration and authentication
-- ceremonies waiting for their answer (docs/auth-protocol.md §3.21). Owned by the auth engine
-- login like the rest of the auth schema, so a real GoTrue could take over.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TABLE auth.webauthn_credentials (
  id               uuid        NOT NULL DEFAULT gen_random_uuid(),
  user_id          uuid        NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  credential_id    bytea       NOT NULL,
  public_key       bytea       NOT NULL,
  attestation_type text        NOT NULL DEFAULT '',
  aaguid           uuid,
  sign_count       bigint      NOT NULL DEFAULT 0,
  transports       jsonb       NOT NULL DEFAULT '[]'::jsonb,
  backup_eligible  boolean     NOT NULL DEFAULT false,
  backed_up        boolean     NOT NULL DEFAULT false,
  friendly_name    text        NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  last_used_at     timestamptz,
  CONSTRAINT webauthn_credentials_pkey PRIMARY KEY (id)
);
CREATE UNIQUE INDEX webauthn_credentials_credential_id_key ON auth.webauthn_credentials (credential_id);
CREATE INDEX webauthn_credentials_user_id_idx ON auth.webauthn_credentials (user_id);

CREATE TABLE auth.webauthn_challenges (
  id             uuid        NOT NULL DEFAULT gen_random_uuid(),
  user_id        uuid        REFERENCES auth.users (id) ON DELETE CASCADE,
  challenge_type text        NOT NULL CHECK (challenge_type IN ('signup', 'registration', 'authentication')),
  session_data   jsonb       NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  expires_at     timestamptz NOT NULL,
  CONSTRAINT webauthn_challenges_pkey PRIMARY KEY (id)
);
CREATE INDEX webauthn_challenges_user_id_idx ON auth.webauthn_challenges (user_id);
CREATE INDEX webauthn_challenges_expires_at_idx ON auth.webauthn_challenges (expires_at);

ALTER TABLE auth.webauthn_credentials ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.webauthn_challenges ENABLE ROW LEVEL SECURITY;

RESET ROLE;
