-- The PostgreSQL migration of the same number lets the background purge's
-- binding read and delete expired console sessions under row-level
-- security. SQLite has no row-level security (its purge deletes expired
-- rows directly), so there is nothing to change here; the file keeps both
-- folders at the same version numbers.
SELECT 1;
