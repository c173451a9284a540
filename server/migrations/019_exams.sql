-- Exams (issue 33): a timed test made of a class's exercises. The clock is
-- PostgreSQL's, the same for every worker and host. Each student works in
-- a folder of the exam's (STORAGE_ROOT/exams/<id>/<username>), which stops
-- taking changes at their end: ends_at plus their extra time.
CREATE TABLE exams (
    id bigserial PRIMARY KEY,
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    title text NOT NULL CHECK (length(title) BETWEEN 1 AND 100),
    exercises text[] NOT NULL CHECK (cardinality(exercises) BETWEEN 1 AND 20),
    starts_at timestamptz NOT NULL,
    ends_at timestamptz NOT NULL CHECK (ends_at > starts_at),
    allows jsonb NOT NULL,  -- what students may use: {"run": true, "check": true, ...}
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX exams_class ON exams (class_id, ends_at);

-- Extra time, per student (none: no row).
CREATE TABLE exam_extra_time (
    exam_id bigint NOT NULL REFERENCES exams (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    seconds integer NOT NULL CHECK (seconds BETWEEN 0 AND 86400),
    PRIMARY KEY (exam_id, user_id)
);
