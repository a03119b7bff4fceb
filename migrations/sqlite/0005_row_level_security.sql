-- Row-level security exists on PostgreSQL only (0005 there). SQLite is one
-- process's embedded file with no roles; this version keeps both migration
-- lists in step.
SELECT 1;
