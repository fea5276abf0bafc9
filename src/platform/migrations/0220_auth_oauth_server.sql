-- 0220_auth_oauth_server: the tables of GoTrue's OAuth 2.1 server (supabase/auth migrations
-- 20250731150234_add_oauth_clients_table, 20250804100000_add_oauth_authorizations_consents,
-- 20250901200500_add_oauth_client_type, 20250903112500_remove_oauth_client_id_column,
-- 20250904133000_add_oauth_client_id_to_session, 20251104100000_add_nonce_to_oauth_authorizations,
-- 20260121000000_add_token_endpoint_auth_method), in their final shape: registered clients (the
-- row id is the public client_id, the secret is kept only as its SHA-256), authorization
-- requests waiting for the user's consent and their one-use codes, and the consents a user gave.
-- sessions.oauth_client_id (0002) gets its foreign key. docs/auth-protocol.md §3.22.

DO $do$
BEGIN
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

CREATE TYPE auth.oauth_registration_type AS ENUM ('dynamic', 'manual');
CREATE TYPE auth.oauth_client_type AS ENUM ('public', 'confidential');
CREATE TYPE auth.oauth_authorization_status AS ENUM ('pending', 'approved', 'denied', 'expired');
CREATE TYPE auth.oauth_response_type AS ENUM ('code');

CREATE TABLE auth.oauth_clients (
  id                         uuid        NOT NULL,
  client_secret_hash         text,
  registration_type          auth.oauth_registration_type NOT NULL,
  client_type                auth.oauth_client_type NOT NULL DEFAULT 'confidential',
  token_endpoint_auth_method text        NOT NULL
    CHECK (token_endpoint_auth_method IN ('client_secret_basic', 'client_secret_post', 'none')),
  redirect_uris              text        NOT NULL,
  grant_types                text        NOT NULL,
  client_name                text,
  client_uri                 text,
  logo_uri                   text,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  updated_at                 timestamptz NOT NULL DEFAULT now(),
  deleted_at                 timestamptz,
  CONSTRAINT oauth_clients_pkey PRIMARY KEY (id),
  CONSTRAINT oauth_clients_client_name_length CHECK (char_length(client_name) <= 1024),
  CONSTRAINT oauth_clients_client_uri_length CHECK (char_length(client_uri) <= 2048),
  CONSTRAINT oauth_clients_logo_uri_length CHECK (char_length(logo_uri) <= 2048)
);
CREATE INDEX oauth_clients_deleted_at_idx ON auth.oauth_clients (deleted_at);

CREATE TABLE auth.oauth_authorizations (
  id                    uuid        NOT NULL,
  authorization_id      text        NOT NULL,
  client_id             uuid        NOT NULL REFERENCES auth.oauth_clients (id) ON DELETE CASCADE,
  user_id               uuid        REFERENCES auth.users (id) ON DELETE CASCADE,
  redirect_uri          text        NOT NULL,
  scope                 text        NOT NULL,
  state                 text,
  resource              text,
  code_challenge        text,
  code_challenge_method auth.code_challenge_method,
  response_type         auth.oauth_response_type NOT NULL DEFAULT 'code',
  status                auth.oauth_authorization_status NOT NULL DEFAULT 'pending',
  authorization_code    text,
  created_at            timestamptz NOT NULL DEFAULT now(),
  expires_at            timestamptz NOT NULL DEFAULT (now() + interval '3 minutes'),
  approved_at           timestamptz,
  nonce                 text,
  CONSTRAINT oauth_authorizations_pkey PRIMARY KEY (id),
  CONSTRAINT oauth_authorizations_authorization_id_key UNIQUE (authorization_id),
  CONSTRAINT oauth_authorizations_authorization_code_key UNIQUE (authorization_code),
  CONSTRAINT oauth_authorizations_redirect_uri_length CHECK (char_length(redirect_uri) <= 2048),
  CONSTRAINT oauth_authorizations_scope_length CHECK (char_length(scope) <= 4096),
  CONSTRAINT oauth_authorizations_state_length CHECK (char_length(state) <= 4096),
  CONSTRAINT oauth_authorizations_resource_length CHECK (char_length(resource) <= 2048),
  CONSTRAINT oauth_authorizations_code_challenge_length CHECK (char_length(code_challenge) <= 128),
  CONSTRAINT oauth_authorizations_authorization_code_length CHECK (char_length(authorization_code) <= 255),
  CONSTRAINT oauth_authorizations_nonce_length CHECK (char_length(nonce) <= 255),
  CONSTRAINT oauth_authorizations_expires_at_future CHECK (expires_at > created_at)
);
CREATE INDEX oauth_auth_pending_exp_idx ON auth.oauth_authorizations (expires_at) WHERE status = 'pending';

CREATE TABLE auth.oauth_consents (
  id         uuid        NOT NULL,
  user_id    uuid        NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  client_id  uuid        NOT NULL REFERENCES auth.oauth_clients (id) ON DELETE CASCADE,
  scopes     text        NOT NULL,
  granted_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz,
  CONSTRAINT oauth_consents_pkey PRIMARY KEY (id),
  CONSTRAINT oauth_consents_user_client_unique UNIQUE (user_id, client_id),
  CONSTRAINT oauth_consents_scopes_length CHECK (char_length(scopes) <= 2048),
  CONSTRAINT oauth_consents_scopes_not_empty CHECK (char_length(trim(scopes)) > 0),
  CONSTRAINT oauth_consents_revoked_after_granted CHECK (revoked_at IS NULL OR revoked_at >= granted_at)
);
CREATE INDEX oauth_consents_active_user_client_idx ON auth.oauth_consents (user_id, client_id)
  WHERE revoked_at IS NULL;
CREATE INDEX oauth_consents_user_order_idx ON auth.oauth_consents (user_id, granted_at DESC);
CREATE INDEX oauth_consents_active_client_idx ON auth.oauth_consents (client_id) WHERE revoked_at IS NULL;

ALTER TABLE auth.sessions
  ADD CONSTRAINT sessions_oauth_client_id_fkey FOREIGN KEY (oauth_client_id)
  REFERENCES auth.oauth_clients (id) ON DELETE CASCADE;

ALTER TABLE auth.oauth_clients ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.oauth_authorizations ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.oauth_consents ENABLE ROW LEVEL SECURITY;

RESET ROLE;
