-- The PostgreSQL migration of the same number lets the runtime role list
-- the tenants under a maintenance binding and update the sealed columns,
-- for `pinfold keys reseal`. SQLite has no roles or policies, so there is
-- nothing to change here; the file keeps both folders at the same version
-- numbers.
SELECT 1;
