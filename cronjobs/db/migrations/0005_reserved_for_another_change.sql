-- Migration 5: reserved. Another change in flight uses this number; when the branches
-- merge, this placeholder is replaced by that change's migration (and its schema.sql row).
SELECT 1;
