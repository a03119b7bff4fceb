-- The PostgreSQL migration of the same number moves the runtime group
-- role's grants to `pinfold_runtime` and renames the append-only trigger
-- function. SQLite has neither roles nor that function (its append-only
-- triggers raise inline), so there is nothing to change here; the file keeps
-- both folders at the same version numbers.
SELECT 1;
