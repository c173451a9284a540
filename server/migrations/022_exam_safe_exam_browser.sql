-- Safe Exam Browser (issue 33): an exam may require it. The config key the
-- teacher gives (64 hex digits, SEB's "Config Key") is kept to check the
-- X-SafeExamBrowser-ConfigKeyHash header of each of a student's requests
-- for the exam; it is never sent back to anyone. NULL: not required.
ALTER TABLE exams ADD COLUMN seb_config_key text CHECK (seb_config_key ~ '^[0-9a-f]{64}$');
