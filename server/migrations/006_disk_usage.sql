-- How much each user's home held when a program last ran there (files,
-- whatever programs wrote, and earlier versions), for the teacher's roster.
ALTER TABLE users ADD COLUMN disk_bytes bigint;
ALTER TABLE users ADD COLUMN disk_files integer;
ALTER TABLE users ADD COLUMN disk_measured_at timestamptz;
