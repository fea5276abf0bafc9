-- 0275_auth_oauth_redirect_uris_array: an OAuth client's redirect URIs are a text[] instead of
-- GoTrue's comma-joined text (docs/security.md "The tenant boundary"). A comma-joined column
-- turned one registered URI holding a comma into two, the second never checked; an array keeps
-- each URI whole. Existing rows are split as the engine read them until now; a URI that would not
-- pass today's registration checks stays stored, but authorize checks the requested URI again
-- and refuses it.
ALTER TABLE auth.oauth_clients
  ALTER COLUMN redirect_uris TYPE text[]
  USING pg_catalog.string_to_array(redirect_uris, ',');

ALTER TABLE auth.oauth_clients
  ADD CONSTRAINT oauth_clients_redirect_uris_count
  CHECK (pg_catalog.cardinality(redirect_uris) BETWEEN 1 AND 10) NOT VALID;
