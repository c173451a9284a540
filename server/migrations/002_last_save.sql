-- When each user last saved a file, for the teacher's roster.
ALTER TABLE users ADD COLUMN last_save_at timestamptz;
