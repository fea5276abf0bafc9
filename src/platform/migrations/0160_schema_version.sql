-- 0160_schema_version: a schema version that changes when a transaction that ran DDL
-- commits. The REST engine reads it inside every request's transaction (one more statement
-- in the same round trip) and reloads its schema cache when it changed, so it needs no
-- LISTEN connection per tenant. The DDL event trigger keeps sending
-- NOTIFY pgrst, 'reload schema' (PostgREST's convention: any PostgREST serving this
-- database, and the engine's own pool connections, still hear it).
--
-- How the version moves without making DDL transactions wait for each other: the event
-- trigger inserts one row per transaction into platform.schema_changes (no two
-- transactions touch the same row); a deferred constraint trigger on that table runs at
-- COMMIT, deletes the row and adds 1 to platform.schema_version's only row, so the row
-- lock is held only while the transaction commits, and readers see the new version
-- exactly when they can see the DDL. A REPEATABLE READ or SERIALIZABLE transaction whose
-- bump meets another's that committed after its snapshot cannot update the row: it bumps
-- platform.schema_version_extra (a sequence, visible at once) instead of failing its
-- COMMIT. DDL on temporary objects only (CREATE TEMP TABLE in a function, say) changes
-- nothing a schema cache holds: it neither notifies nor bumps.

CREATE TABLE platform.schema_version (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  version  bigint  NOT NULL DEFAULT 0
);
INSERT INTO platform.schema_version DEFAULT VALUES;
CREATE SEQUENCE platform.schema_version_extra;

CREATE TABLE platform.schema_changes (
  xid xid8 PRIMARY KEY
);

CREATE FUNCTION platform.bump_schema_version() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  DELETE FROM platform.schema_changes WHERE xid = NEW.xid;
  BEGIN
    UPDATE platform.schema_version SET version = version + 1;
  EXCEPTION WHEN serialization_failure THEN
    PERFORM nextval('platform.schema_version_extra');
  END;
  RETURN NULL;
END
$fn$;

CREATE CONSTRAINT TRIGGER bump_schema_version AFTER INSERT ON platform.schema_changes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION platform.bump_schema_version();

CREATE OR REPLACE FUNCTION platform.notify_schema_reload() RETURNS event_trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
  IF TG_EVENT = 'ddl_command_end' THEN
    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands()) THEN
      -- DROP reports its objects to sql_drop only (which ran before this event).
      IF TG_TAG LIKE 'DROP %' THEN RETURN; END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() c
                       WHERE c.schema_name IS NULL OR c.schema_name NOT LIKE 'pg\_temp%') THEN
      RETURN;
    END IF;
  ELSIF TG_EVENT = 'sql_drop' THEN
    IF NOT EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects() d WHERE NOT d.is_temporary) THEN
      RETURN;
    END IF;
  END IF;
  PERFORM pg_notify('pgrst', 'reload schema');
  INSERT INTO platform.schema_changes (xid) VALUES (pg_current_xact_id()) ON CONFLICT DO NOTHING;
END
$fn$;

REVOKE ALL ON platform.schema_version, platform.schema_changes, platform.schema_version_extra FROM PUBLIC;
REVOKE ALL ON FUNCTION platform.bump_schema_version() FROM PUBLIC;

-- The REST engine login reads the version (it reaches `platform` through no request role:
-- its memberships are NOINHERIT).
DO $do$
DECLARE
  rest text := current_setting('gatehouse.role_rest');
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA platform TO %I', rest);
  EXECUTE format('GRANT SELECT ON platform.schema_version, platform.schema_version_extra TO %I', rest);
END
$do$;
