-- What happened during an exam that a teacher may want to see (issue 33):
-- evidence, never a verdict. The browser reports pastes, focus lost and
-- back, and going offline and online; the server itself records Run
-- presses and each IDE opened (from a session not seen before in the exam:
-- a second session). `at` is the server's time of arrival.
CREATE TABLE exam_signals (
    id bigserial PRIMARY KEY,
    exam_id bigint NOT NULL REFERENCES exams (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    at timestamptz NOT NULL DEFAULT now(),
    kind text NOT NULL CHECK (kind IN ('paste', 'focus_lost', 'focus_back', 'offline', 'online', 'run', 'ide_opened',
                                  'second_session')),
    detail jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX exam_signals_student ON exam_signals (exam_id, user_id, at);
