-- placeholder for local tests only (not committed)
SELECT 1;
