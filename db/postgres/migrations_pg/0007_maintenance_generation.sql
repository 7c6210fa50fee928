-- Maintenance mode (broker/maintenance.go) is one row of the settings,
-- key 'maintenance', which every process keeps in its lookup cache as
-- "both scopes off" (a pop then reads nothing more). Writing that row
-- moves the cache generation (0002), so that the other processes read it
-- again before their next write. Only that key: the settings' other rows
-- (the health check's space probe among them) leave the caches alone. A
-- row trigger, since an insert counts here too (the row is made when the
-- mode is first turned on), and the settings are seldom written.
CREATE FUNCTION lazarus_settings_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP <> 'DELETE' AND NEW.key = 'maintenance') OR (TG_OP <> 'INSERT' AND OLD.key = 'maintenance') THEN
        UPDATE cache_generation SET gen = gen + 1 WHERE id = 1;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER settings_cache_change AFTER INSERT OR UPDATE OR DELETE ON settings
    FOR EACH ROW EXECUTE FUNCTION lazarus_settings_moved();
CREATE TRIGGER settings_cache_truncate AFTER TRUNCATE ON settings
    FOR EACH STATEMENT EXECUTE FUNCTION lazarus_cache_truncated();
