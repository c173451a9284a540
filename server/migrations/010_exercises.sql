-- Exercises that check themselves (issue 23). The exercises are files
-- (STORAGE_ROOT/checks/<class>/<slug>/); what is kept here is what students
-- did with them: every press of Check, and per student and exercise the
-- numbers the teacher's grid shows.

-- One check of a student's work. `results` is what the student may see,
-- filtered when it was written (a hidden check's input, expected output
-- and hint never enter it); `details` is the teacher's (what the grader
-- saw). counted: the attempt counts towards the grade (not when the code
-- did not parse, nor after the due date: kept all the same).
CREATE TABLE exercise_attempts (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    exercise text NOT NULL CHECK (exercise ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    counted boolean NOT NULL,
    not_gradable boolean NOT NULL DEFAULT false,
    score integer NOT NULL CHECK (score >= 0),
    max_score integer NOT NULL CHECK (max_score >= score),
    results jsonb NOT NULL,
    details jsonb NOT NULL
);
CREATE INDEX exercise_attempts_user ON exercise_attempts (user_id, class_id, exercise, id DESC);

-- Per student and exercise, what the grid shows: written in the same
-- transaction as each attempt. A summary rather than an index and a query
-- over the attempts: the grid of a class (60 students x 20 exercises) and
-- every live update read it, while students may press Check hundreds of
-- times; reading one row per cell keeps that cost flat however many
-- attempts there are, and writing it costs one upsert per attempt.
-- best_*: over counted attempts (NULL: none counted yet); latest_*: the
-- newest attempt, counted or not; failing: the ids of the checks it failed.
CREATE TABLE exercise_progress (
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    exercise text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    best_score integer,
    best_max integer,
    latest_id bigint NOT NULL REFERENCES exercise_attempts (id) ON DELETE CASCADE,
    latest_score integer NOT NULL,
    latest_max integer NOT NULL,
    latest_counted boolean NOT NULL,
    latest_not_gradable boolean NOT NULL,
    failing text[] NOT NULL,
    last_at timestamptz NOT NULL,
    PRIMARY KEY (class_id, user_id, exercise)
);

-- The live class view follows attempts as it follows runs and saves: the
-- student's id on 'class_live' (migration 007's function), on commit.
CREATE TRIGGER exercise_progress_class_live AFTER INSERT OR UPDATE ON exercise_progress FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
