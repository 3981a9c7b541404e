-- Notes v1 → v2.
-- v1 kept any integer as a note's "rank"; v2 renames it "priority" (renamedFrom, applied
-- automatically before this step) and uses 0 (none) to 3 (high). Clamp the old values.
UPDATE "Note" SET "priority" = max(0, min("priority", 3));
