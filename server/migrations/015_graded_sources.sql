-- What each attempt checked (issue 29): every check of an attempt runs one
-- snapshot of the student's file, read once as Check was pressed, and the
-- teacher can open exactly those bytes. `file` is its path in the student's
-- home, `version` its etag; the bytes are kept once per student and version
-- (a student pressing Check again on the same code adds no copy).
ALTER TABLE exercise_attempts ADD COLUMN file text, ADD COLUMN version text;

CREATE TABLE graded_sources (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    version text NOT NULL,
    source bytea NOT NULL,
    PRIMARY KEY (user_id, version)
);
