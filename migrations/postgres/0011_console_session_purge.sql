-- Expired console sessions are deleted by every server's background purge,
-- not only when someone of the same tenant signs in again. The purge binds
-- its transaction to the marker 'maintenance:purge' (as for resolve
-- sessions and grant states, migration 0005), which no tenant id can equal;
-- here too the marker may read and delete, never insert or update, and only
-- rows whose expiry is already past by the database's own clock.
CREATE POLICY maintenance_purge_select ON console_sessions FOR SELECT
    USING (current_setting('app.tenant_id', true) = 'maintenance:purge'
           AND expires_at < (extract(epoch FROM now()) * 1000)::bigint);
CREATE POLICY maintenance_purge_delete ON console_sessions FOR DELETE
    USING (current_setting('app.tenant_id', true) = 'maintenance:purge'
           AND expires_at < (extract(epoch FROM now()) * 1000)::bigint);
