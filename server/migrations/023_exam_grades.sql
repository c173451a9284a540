-- Grading exams (issue 33): after a student's end, their exam folder is
-- their submission; a teacher asks for it to be graded with each exercise's
-- checks, hidden ones included. One row per (exam, student, exercise): the
-- latest grading asked for, queued until its attempt has run.
CREATE TABLE exam_grades (
    exam_id bigint NOT NULL REFERENCES exams (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    exercise text NOT NULL,
    state text NOT NULL CHECK (state IN ('queued', 'graded', 'not_graded')),
    score integer,
    max_score integer,
    checks jsonb NOT NULL DEFAULT '[]',  -- each check: id, kind, passed, points, earned, message, hidden
    message text NOT NULL DEFAULT '',    -- why it was not graded, or why the code could not be
    file text,                           -- the file graded and its version (etag)
    version text,
    asked_at timestamptz NOT NULL DEFAULT now(),
    graded_at timestamptz,
    PRIMARY KEY (exam_id, user_id, exercise)
);
