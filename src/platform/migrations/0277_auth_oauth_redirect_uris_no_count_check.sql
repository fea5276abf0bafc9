-- 0277_auth_oauth_redirect_uris_no_count_check: drops the count check 0275 put on
-- auth.oauth_clients.redirect_uris (1 to 10). A row registered before 0275 whose URIs held commas
-- was split into more than 10 (or none): NOT VALID left it in place, but every UPDATE of the row,
-- the soft delete included, failed the check, so such a client could not be deleted. The engine
-- checks the count on registration and update (docs/auth-protocol.md §3.22).
ALTER TABLE auth.oauth_clients DROP CONSTRAINT IF EXISTS oauth_clients_redirect_uris_count;
