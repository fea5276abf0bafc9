// Functions for the RPC tests (not a test file), created by the tenant owner on top of the
// write fixture: scalar, composite, set-returning, OUT parameters, single unnamed
// parameters, overloads, volatile writers, void, RAISE, response.* settings.
export const RPC_SQL = `
CREATE FUNCTION add_them(a int, b int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
COMMENT ON FUNCTION add_them(int, int) IS 'Adds two numbers';
CREATE FUNCTION hello(name text DEFAULT 'world') RETURNS text LANGUAGE sql STABLE AS $$SELECT 'Hello, ' || name$$;
CREATE FUNCTION books_by(author int) RETURNS SETOF books LANGUAGE sql STABLE AS 'SELECT * FROM books WHERE author_id = author';
CREATE FUNCTION numbers(n int) RETURNS SETOF int LANGUAGE sql IMMUTABLE AS 'SELECT generate_series(1, n)';
CREATE FUNCTION author_row(author_id int) RETURNS authors LANGUAGE sql STABLE AS 'SELECT * FROM authors WHERE id = author_id';
CREATE FUNCTION squares(n int) RETURNS TABLE(i int, sq int) LANGUAGE sql IMMUTABLE AS 'SELECT g, g * g FROM generate_series(1, n) g';
CREATE FUNCTION twice_thrice(x int, OUT doubled int, OUT tripled int) LANGUAGE sql IMMUTABLE AS 'SELECT x * 2, x * 3';
CREATE FUNCTION echo_json(json) RETURNS json LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE FUNCTION shout(text) RETURNS text LANGUAGE sql IMMUTABLE AS 'SELECT upper($1)';
CREATE FUNCTION byte_count(bytea) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT length($1)';
CREATE FUNCTION named_json(data jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS 'SELECT data';
CREATE FUNCTION sum_array(arr int[]) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT sum(x)::int FROM unnest(arr) x';
CREATE FUNCTION count_args(VARIADIC v text[]) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT array_length(v, 1)';
CREATE FUNCTION overloaded(a int) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'one int'$$;
CREATE FUNCTION overloaded(a int, b int) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'two ints'$$;
CREATE FUNCTION overloaded(x text) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'one text'$$;
CREATE FUNCTION ambiguous(a int) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'int'$$;
CREATE FUNCTION ambiguous(a text) RETURNS text LANGUAGE sql IMMUTABLE AS $$SELECT 'text'$$;
CREATE FUNCTION no_args() RETURNS text LANGUAGE sql STABLE AS $$SELECT 'none'$$;
CREATE FUNCTION add_item(item_name text, qty int DEFAULT 1) RETURNS items LANGUAGE sql VOLATILE
  AS 'INSERT INTO items (name, qty) VALUES (item_name, qty) RETURNING *';
CREATE FUNCTION harmless_volatile() RETURNS int LANGUAGE sql VOLATILE AS 'SELECT 1';
CREATE FUNCTION do_nothing() RETURNS void LANGUAGE sql AS '';
CREATE FUNCTION fail_plain() RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'plain failure' USING DETAIL = 'some detail', HINT = 'some hint'; END $$;
CREATE FUNCTION fail_payment() RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE SQLSTATE 'PT402' USING MESSAGE = 'Payment Required', DETAIL = 'Quota exceeded', HINT = 'Upgrade your plan'; END $$;
CREATE FUNCTION fail_teapot() RETURNS int LANGUAGE plpgsql AS $$
BEGIN RAISE SQLSTATE 'PT418' USING MESSAGE = 'I am a teapot'; END $$;
CREATE FUNCTION fail_custom() RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE SQLSTATE 'PGRST' USING
  MESSAGE = '{"code":"123","message":"Custom failure","details":"custom details","hint":"custom hint"}',
  DETAIL = '{"status":409,"headers":{"X-Custom":"yes"}}'; END $$;
CREATE FUNCTION fail_custom_bad() RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE SQLSTATE 'PGRST' USING MESSAGE = 'not json', DETAIL = '{}'; END $$;
CREATE FUNCTION custom_response() RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM set_config('response.status', '202', true);
  PERFORM set_config('response.headers', '[{"X-Extra":"1"},{"Cache-Control":"no-store"}]', true);
  RETURN 'accepted';
END $$;
CREATE FUNCTION whoami() RETURNS json LANGUAGE sql STABLE AS $$SELECT json_build_object('uid', auth.uid(), 'method', current_setting('request.method', true), 'path', current_setting('request.path', true))$$;
CREATE FUNCTION secret_fn() RETURNS int LANGUAGE sql STABLE AS 'SELECT 42';
REVOKE EXECUTE ON FUNCTION secret_fn() FROM PUBLIC;
`
