-- A placeholder: number 39 belongs to another branch's migration, and
-- migrations must run 1, 2, 3, ... for 0040 to apply on this branch. The
-- merge keeps the other branch's 0039 and drops this file.
SELECT 1;
