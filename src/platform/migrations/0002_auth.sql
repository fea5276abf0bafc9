-- 0002_auth: the GoTrue `auth` schema (docs/auth-protocol.md §7: enum types, core tables, MFA
-- tables, helper functions), owned by the tenant's auth engine login so a real GoTrue
-- could take over. Objects are created under SET LOCAL ROLE of that login, so it owns
-- them. Role names come from gatehouse.role_<kind>, set by the migration runner.

DO $do$
BEGIN
  EXECUTE format('CREATE SCHEMA auth AUTHORIZATION %I', current_setting('gatehouse.role_authn'));
  EXECUTE format('SET LOCAL ROLE %I', current_setting('gatehouse.role_authn'));
END
$do$;

-- ---- enum types (§7.1) -------------------------------------------------------------------

CREATE TYPE auth.factor_status AS ENUM ('unverified', 'verified');
CREATE TYPE auth.factor_type AS ENUM ('totp', 'webauthn', 'phone');
CREATE TYPE auth.aal_level AS ENUM ('aal1', 'aal2', 'aal3');
CREATE TYPE auth.code_challenge_method AS ENUM ('s256', 'plain');
CREATE TYPE auth.one_time_token_type AS ENUM (
  'confirmation_token', 'reauthentication_token', 'recovery_token',
  'email_change_token_new', 'email_change_token_current', 'phone_change_token');

-- ---- core tables (§7.2) ------------------------------------------------------------------

CREATE TABLE auth.users (
  instance_id                 uuid,
  id                          uuid PRIMARY KEY,
  aud                         varchar(255),
  role                        varchar(255),
  email                       varchar(255),
  encrypted_password          varchar(255),
  email_confirmed_at          timestamptz,
  invited_at                  timestamptz,
  confirmation_token          varchar(255),
  confirmation_sent_at        timestamptz,
  recovery_token              varchar(255),
  recovery_sent_at            timestamptz,
  email_change_token_new      varchar(255),
  email_change                varchar(255),
  email_change_sent_at        timestamptz,
  last_sign_in_at             timestamptz,
  raw_app_meta_data           jsonb,
  raw_user_meta_data          jsonb,
  is_super_admin              boolean,
  created_at                  timestamptz,
  updated_at                  timestamptz,
  phone                       text UNIQUE DEFAULT NULL,
  phone_confirmed_at          timestamptz,
  phone_change                text DEFAULT '',
  phone_change_token          varchar(255) DEFAULT '',
  phone_change_sent_at        timestamptz,
  confirmed_at                timestamptz GENERATED ALWAYS AS (LEAST(email_confirmed_at, phone_confirmed_at)) STORED,
  email_change_token_current  varchar(255) DEFAULT '',
  email_change_confirm_status smallint DEFAULT 0 CHECK (email_change_confirm_status >= 0 AND email_change_confirm_status <= 2),
  banned_until                timestamptz,
  reauthentication_token      varchar(255) DEFAULT '',
  reauthentication_sent_at    timestamptz,
  is_sso_user                 boolean NOT NULL DEFAULT false,
  deleted_at                  timestamptz,
  is_anonymous                boolean NOT NULL DEFAULT false
);
CREATE INDEX users_instance_id_idx ON auth.users (instance_id);
CREATE INDEX users_instance_id_email_idx ON auth.users (instance_id, lower(email));
CREATE UNIQUE INDEX users_email_partial_key ON auth.users (email) WHERE is_sso_user = false;
CREATE UNIQUE INDEX confirmation_token_idx ON auth.users (confirmation_token) WHERE confirmation_token !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX recovery_token_idx ON auth.users (recovery_token) WHERE recovery_token !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX email_change_token_current_idx ON auth.users (email_change_token_current) WHERE email_change_token_current !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX email_change_token_new_idx ON auth.users (email_change_token_new) WHERE email_change_token_new !~ '^[0-9 ]*$';
CREATE UNIQUE INDEX reauthentication_token_idx ON auth.users (reauthentication_token) WHERE reauthentication_token !~ '^[0-9 ]*$';
CREATE INDEX users_is_anonymous_idx ON auth.users (is_anonymous);

CREATE TABLE auth.identities (
  provider_id     text NOT NULL,
  user_id         uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  identity_data   jsonb NOT NULL,
  provider        text NOT NULL,
  last_sign_in_at timestamptz,
  created_at      timestamptz,
  updated_at      timestamptz,
  email           text GENERATED ALWAYS AS (lower(identity_data ->> 'email')) STORED,
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  CONSTRAINT identities_provider_id_provider_unique UNIQUE (provider_id, provider)
);
CREATE INDEX identities_user_id_idx ON auth.identities (user_id);
CREATE INDEX identities_email_idx ON auth.identities (email text_pattern_ops);

-- oauth_client_id has no foreign key: the OAuth-server tables (auth.oauth_clients) are
-- not part of this schema yet.
CREATE TABLE auth.sessions (
  id                     uuid PRIMARY KEY,
  user_id                uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  created_at             timestamptz,
  updated_at             timestamptz,
  factor_id              uuid,
  aal                    auth.aal_level,
  not_after              timestamptz,
  refreshed_at           timestamp,
  user_agent             text,
  ip                     inet,
  tag                    text,
  oauth_client_id        uuid,
  refresh_token_hmac_key text,
  refresh_token_counter  bigint,
  scopes                 text CHECK (char_length(scopes) <= 4096)
);
CREATE INDEX sessions_user_id_idx ON auth.sessions (user_id);
CREATE INDEX user_id_created_at_idx ON auth.sessions (user_id, created_at);
CREATE INDEX sessions_not_after_idx ON auth.sessions (not_after DESC);
CREATE INDEX sessions_oauth_client_id_idx ON auth.sessions (oauth_client_id);

CREATE TABLE auth.refresh_tokens (
  instance_id uuid,
  id          bigserial PRIMARY KEY,
  token       varchar(255) CONSTRAINT refresh_tokens_token_unique UNIQUE,
  user_id     varchar(255),
  revoked     boolean,
  created_at  timestamptz,
  updated_at  timestamptz,
  parent      varchar(255),
  session_id  uuid REFERENCES auth.sessions (id) ON DELETE CASCADE
);
CREATE INDEX refresh_tokens_instance_id_idx ON auth.refresh_tokens (instance_id);
CREATE INDEX refresh_tokens_instance_id_user_id_idx ON auth.refresh_tokens (instance_id, user_id);
CREATE INDEX refresh_tokens_parent_idx ON auth.refresh_tokens (parent);
CREATE INDEX refresh_tokens_session_id_revoked_idx ON auth.refresh_tokens (session_id, revoked);
CREATE INDEX refresh_tokens_updated_at_idx ON auth.refresh_tokens (updated_at DESC);

CREATE TABLE auth.flow_state (
  id                     uuid PRIMARY KEY,
  user_id                uuid,
  auth_code              text,
  code_challenge_method  auth.code_challenge_method,
  code_challenge         text,
  provider_type          text NOT NULL,
  provider_access_token  text,
  provider_refresh_token text,
  created_at             timestamptz,
  updated_at             timestamptz,
  authentication_method  text NOT NULL,
  auth_code_issued_at    timestamptz,
  invite_token           text,
  referrer               text,
  oauth_client_state_id  uuid,
  linking_target_id      uuid,
  email_optional         boolean NOT NULL DEFAULT false
);
CREATE INDEX idx_auth_code ON auth.flow_state (auth_code);
CREATE INDEX idx_user_id_auth_method ON auth.flow_state (user_id, authentication_method);
CREATE INDEX flow_state_created_at_idx ON auth.flow_state (created_at DESC);

CREATE TABLE auth.one_time_tokens (
  id         uuid PRIMARY KEY,
  user_id    uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  token_type auth.one_time_token_type NOT NULL,
  token_hash text NOT NULL CHECK (char_length(token_hash) > 0),
  relates_to text NOT NULL,
  created_at timestamp NOT NULL DEFAULT now(),
  updated_at timestamp NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX one_time_tokens_user_id_token_type_key ON auth.one_time_tokens (user_id, token_type);
CREATE INDEX one_time_tokens_token_hash_hash_idx ON auth.one_time_tokens USING hash (token_hash);
CREATE INDEX one_time_tokens_relates_to_hash_idx ON auth.one_time_tokens USING hash (relates_to);

CREATE TABLE auth.mfa_factors (
  id                           uuid PRIMARY KEY,
  user_id                      uuid NOT NULL REFERENCES auth.users (id) ON DELETE CASCADE,
  friendly_name                text,
  factor_type                  auth.factor_type NOT NULL,
  status                       auth.factor_status NOT NULL,
  created_at                   timestamptz NOT NULL,
  updated_at                   timestamptz NOT NULL,
  secret                       text,
  phone                        text DEFAULT NULL,
  last_challenged_at           timestamptz UNIQUE DEFAULT NULL,
  web_authn_credential         jsonb,
  web_authn_aaguid             uuid,
  last_webauthn_challenge_data jsonb
);
CREATE UNIQUE INDEX mfa_factors_user_friendly_name_unique ON auth.mfa_factors (friendly_name, user_id) WHERE trim(friendly_name) <> '';
CREATE UNIQUE INDEX unique_phone_factor_per_user ON auth.mfa_factors (user_id, phone);
CREATE INDEX factor_id_created_at_idx ON auth.mfa_factors (user_id, created_at);
CREATE INDEX mfa_factors_user_id_idx ON auth.mfa_factors (user_id);

CREATE TABLE auth.mfa_challenges (
  id                     uuid PRIMARY KEY,
  factor_id              uuid NOT NULL REFERENCES auth.mfa_factors (id) ON DELETE CASCADE,
  created_at             timestamptz NOT NULL,
  verified_at            timestamptz,
  ip_address             inet NOT NULL,
  otp_code               text,
  web_authn_session_data jsonb
);
CREATE INDEX mfa_challenge_created_at_idx ON auth.mfa_challenges (created_at DESC);

CREATE TABLE auth.mfa_amr_claims (
  session_id            uuid NOT NULL REFERENCES auth.sessions (id) ON DELETE CASCADE,
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL,
  authentication_method text NOT NULL,
  id                    uuid CONSTRAINT amr_id_pk PRIMARY KEY,
  CONSTRAINT mfa_amr_claims_session_id_authentication_method_pkey UNIQUE (session_id, authentication_method)
);

CREATE TABLE auth.audit_log_entries (
  instance_id uuid,
  id          uuid PRIMARY KEY,
  payload     json,
  created_at  timestamptz,
  ip_address  varchar(64) NOT NULL DEFAULT ''
);
CREATE INDEX audit_logs_instance_id_idx ON auth.audit_log_entries (instance_id);

CREATE TABLE auth.instances (
  id              uuid PRIMARY KEY,
  uuid            uuid,
  raw_base_config text,
  created_at      timestamptz,
  updated_at      timestamptz
);

-- The server-side PKCE verifier when acting as an OAuth client (§7.2 "other tables").
CREATE TABLE auth.oauth_client_states (
  id            uuid PRIMARY KEY,
  provider_type text NOT NULL,
  code_verifier text,
  created_at    timestamptz NOT NULL
);

-- GoTrue enables RLS on every auth table (its owner, the engine login, is not subject to it).
ALTER TABLE auth.users ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.identities ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.refresh_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.flow_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.one_time_tokens ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.mfa_factors ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.mfa_challenges ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.mfa_amr_claims ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.audit_log_entries ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.instances ENABLE ROW LEVEL SECURITY;
ALTER TABLE auth.oauth_client_states ENABLE ROW LEVEL SECURITY;

-- ---- helper functions (§7.3) -------------------------------------------------------------
-- Plain SQL, so the planner can inline them into policies. The legacy per-claim settings
-- (request.jwt.claim.sub, set by PostgREST < 9) win, as in GoTrue's definitions.

CREATE FUNCTION auth.uid() RETURNS uuid LANGUAGE sql STABLE AS $fn$
  SELECT coalesce(
    nullif(current_setting('request.jwt.claim.sub', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
  )::uuid
$fn$;

CREATE FUNCTION auth.email() RETURNS text LANGUAGE sql STABLE AS $fn$
  SELECT coalesce(
    nullif(current_setting('request.jwt.claim.email', true), ''),
    (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'email')
  )::text
$fn$;

CREATE FUNCTION auth.jwt() RETURNS jsonb LANGUAGE sql STABLE AS $fn$
  SELECT coalesce(
    nullif(current_setting('request.jwt.claim', true), ''),
    nullif(current_setting('request.jwt.claims', true), '')
  )::jsonb
$fn$;

-- auth.role(): the caller kind as policies expect. The claim may hold 'authenticated' (a
-- GoTrue token) or this tenant's Postgres role name (our gateway's upstream token); the
-- latter is mapped back. Without any claim, the current role is mapped when it is one of
-- this tenant's request roles. The names are written into the body at migration time
-- (from platform.roles), which keeps the function inlinable and needs no privilege.
DO $do$
BEGIN
  EXECUTE format($f$
    CREATE FUNCTION auth.role() RETURNS text LANGUAGE sql STABLE AS $body$
      SELECT CASE r WHEN %1$L THEN 'anon' WHEN %2$L THEN 'authenticated' WHEN %3$L THEN 'service_role' ELSE r END
      FROM (SELECT coalesce(
        nullif(current_setting('request.jwt.claim.role', true), ''),
        (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role'),
        CASE WHEN current_user IN (%1$L, %2$L, %3$L) THEN current_user::text END
      )::text AS r) AS claim
    $body$
  $f$, current_setting('gatehouse.role_anon'), current_setting('gatehouse.role_auth'), current_setting('gatehouse.role_svc'));
END
$do$;

COMMENT ON FUNCTION auth.uid() IS 'Deprecated in GoTrue in favour of auth.jwt() ->> ''sub''.';
COMMENT ON FUNCTION auth.role() IS 'anon | authenticated | service_role (this tenant''s role names mapped back). Deprecated in GoTrue in favour of auth.jwt() ->> ''role''.';
COMMENT ON FUNCTION auth.email() IS 'Deprecated in GoTrue in favour of auth.jwt() ->> ''email''.';

-- ---- privileges --------------------------------------------------------------------------
-- The request roles and the owner may call the helpers (policies do); no table grants.
-- The owner may reference auth.users(id) from its own tables (the usual user_id column).

REVOKE ALL ON FUNCTION auth.uid(), auth.role(), auth.email(), auth.jwt() FROM PUBLIC;

DO $do$
DECLARE
  anon  text := current_setting('gatehouse.role_anon');
  auth  text := current_setting('gatehouse.role_auth');
  svc   text := current_setting('gatehouse.role_svc');
  owner text := current_setting('gatehouse.role_owner');
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA auth TO %I, %I, %I, %I', anon, auth, svc, owner);
  EXECUTE format('GRANT EXECUTE ON FUNCTION auth.uid(), auth.role(), auth.email(), auth.jwt() TO %I, %I, %I, %I',
    anon, auth, svc, owner);
  EXECUTE format('GRANT REFERENCES (id) ON auth.users TO %I', owner);
END
$do$;

RESET ROLE;
