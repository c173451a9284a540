-- Every press of Check is kept (issue 29), the ones that could not be
-- checked too, so that no press is hidden from the teacher. outcome:
-- 'checked' (the checks ran; its score), 'not_gradable' (the program does
-- not parse), 'not_checked' (the check itself could not be done: `reason`
-- is the refusal's code, such as sandbox_failed, changed or internal_error,
-- and details.message says it in a sentence). Only a checked
-- attempt can count; not_gradable stays true for both that cannot (the
-- grid and the page read it).
ALTER TABLE exercise_attempts
    ADD COLUMN outcome text NOT NULL DEFAULT 'checked'
        CHECK (outcome IN ('checked', 'not_gradable', 'not_checked')),
    ADD COLUMN reason text CHECK (length(reason) BETWEEN 1 AND 64);  -- a code of ours: never refused for its spelling
UPDATE exercise_attempts SET outcome = 'not_gradable' WHERE not_gradable;
ALTER TABLE exercise_attempts
    ADD CONSTRAINT exercise_attempts_outcome CHECK ((outcome = 'checked') <> not_gradable
                                                    AND (outcome = 'not_checked') = (reason IS NOT NULL)
                                                    AND (outcome = 'checked' OR NOT counted));
