-- A Check press in an exam is a signal too (issue 33 lists Run and Check
-- presses), recorded by the server as the press comes, with the exercise.
ALTER TABLE exam_signals DROP CONSTRAINT exam_signals_kind_check;
ALTER TABLE exam_signals ADD CONSTRAINT exam_signals_kind_check
    CHECK (kind IN ('paste', 'focus_lost', 'focus_back', 'offline', 'online', 'run', 'check', 'ide_opened',
                    'second_session'));
