-- 0003_grant_sequences: platform.grant() also covers the sequences that number a table's
-- rows. An INSERT into a table with a serial/bigserial column calls nextval() on the
-- column's sequence, which needs USAGE on it: a grant of INSERT (or ALL) on a table now
-- grants USAGE on the sequences the table owns (serial, bigserial, identity). A sequence
-- may also be named directly: platform.grant('USAGE', 'public.todos_id_seq', 'auth').
-- Same signature, so the owner's EXECUTE and ownership of the function are kept.

CREATE OR REPLACE FUNCTION platform.grant(privileges text, tbl regclass, kind text) RETURNS text
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  item text;
  privs text[] := '{}';
  allowed text[];
  target name;
  rel record;
  seq record;
  stmts text[] := '{}';
  stmt text;
BEGIN
  IF privileges IS NULL OR tbl IS NULL THEN
    RAISE EXCEPTION 'privileges and table are required' USING ERRCODE = '22023';
  END IF;
  target := platform.role(kind);
  SELECT n.nspname, c.relname, c.relkind, c.relowner INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
  IF rel.relkind = 'S' THEN
    allowed := ARRAY['USAGE', 'SELECT', 'UPDATE', 'ALL'];
  ELSIF rel.relkind IN ('r', 'p', 'v', 'm', 'f') THEN
    allowed := ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER', 'ALL'];
  ELSE
    RAISE EXCEPTION '% is not a table, view or sequence', tbl USING ERRCODE = '42809';
  END IF;
  FOREACH item IN ARRAY regexp_split_to_array(btrim(privileges), '\s*,\s*') LOOP
    item := regexp_replace(upper(btrim(item)), '\s+', ' ', 'g');
    IF item = 'ALL PRIVILEGES' THEN item := 'ALL'; END IF;
    IF NOT item = ANY (allowed) THEN
      RAISE EXCEPTION 'invalid privilege % for %', quote_literal(item),
        CASE WHEN rel.relkind = 'S' THEN 'a sequence' ELSE 'a table' END
        USING ERRCODE = '22023',
        HINT = 'use a comma-separated list of ' || array_to_string(allowed, ', ');
    END IF;
    IF NOT item = ANY (privs) THEN privs := privs || item; END IF;
  END LOOP;
  IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
    RAISE EXCEPTION 'must be owner of % %', CASE WHEN rel.relkind = 'S' THEN 'sequence' ELSE 'table' END, tbl
      USING ERRCODE = '42501';
  END IF;

  IF rel.relkind = 'S' THEN
    stmt := format('GRANT %s ON SEQUENCE %I.%I TO %I', array_to_string(privs, ', '), rel.nspname, rel.relname, target);
    EXECUTE stmt;
    RETURN stmt;
  END IF;

  stmt := format('GRANT %s ON TABLE %I.%I TO %I', array_to_string(privs, ', '), rel.nspname, rel.relname, target);
  EXECUTE stmt;
  stmts := stmts || stmt;
  IF 'INSERT' = ANY (privs) OR 'ALL' = ANY (privs) THEN
    -- The table's own sequences: owned by one of its columns (serial: deptype 'a'; identity:
    -- deptype 'i').
    FOR seq IN
      SELECT sn.nspname, s.relname
        FROM pg_depend d
        JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
        JOIN pg_namespace sn ON sn.oid = s.relnamespace
       WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
         AND d.refobjid = tbl AND d.deptype IN ('a', 'i')
       ORDER BY s.relname
    LOOP
      stmt := format('GRANT USAGE ON SEQUENCE %I.%I TO %I', seq.nspname, seq.relname, target);
      EXECUTE stmt;
      stmts := stmts || stmt;
    END LOOP;
  END IF;
  RETURN array_to_string(stmts, '; ');
END
$fn$;

COMMENT ON FUNCTION platform.grant(text, regclass, text) IS
  'GRANT <privileges> ON <table or sequence> TO platform.role(<kind>); INSERT or ALL on a table also grants USAGE on the sequences it owns. Returns the statements it ran.';
