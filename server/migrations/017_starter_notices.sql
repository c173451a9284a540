-- Starters a student kept their own version of (issue 30): a teacher's push
-- that left a student's changed copy as it was ('keep') tells the student,
-- who can see the difference and take the new version as a new file. One
-- row per student, class and path: the newest push of it, until the student
-- takes it or puts it aside.
CREATE TABLE starter_notices (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    path text NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, class_id, path)
);
