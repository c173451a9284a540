-- Replay (issue 33): how each file was written, change by change. A row
-- holds a few seconds of one stream's edits of one file (a stream: one
-- page's socket), compressed (server/replay/service.py): the text it
-- starts from when it starts a stream, and CodeMirror's changes with their
-- times. `area_key` is the file's area (files/area.py): 'home/ada',
-- 'exam/5/ada'. An exam's rows go with the exam; the others are bounded per
-- student (edit_log_usage, REPLAY_KEEP_BYTES), the oldest removed first.
CREATE TABLE edit_log (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    exam_id bigint REFERENCES exams (id) ON DELETE CASCADE,
    area_key text NOT NULL,
    path text NOT NULL,
    stream text NOT NULL,
    at timestamptz NOT NULL,       -- the first edit's time (the server's clock)
    last_at timestamptz NOT NULL,  -- the last's
    typed integer NOT NULL,        -- characters inserted, pastes included
    pasted integer NOT NULL,       -- characters pasted
    bytes integer NOT NULL,        -- length(data): what the row costs
    data bytea NOT NULL            -- zlib of {"base", "length", "edits"}
);
CREATE INDEX edit_log_file ON edit_log (area_key, path, id);
CREATE INDEX edit_log_student ON edit_log (user_id, id) WHERE exam_id IS NULL;

-- The bytes of each student's rows outside exams, kept as rows are added
-- and removed, so that the bound is known without adding them up.
CREATE TABLE edit_log_usage (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    bytes bigint NOT NULL
);
