-- What a failed run's traceback says, beside the line that names it
-- (error_line): the exception's kind and message, and the file (in the
-- student's home) and line of the innermost frame in the student's own
-- files, so the class view can group the class's errors by what they are.
-- Read from the program's stderr: bounded and cleaned before it is written.
ALTER TABLE run_activity
    ADD COLUMN error_kind text,
    ADD COLUMN error_message text,
    ADD COLUMN error_file text,
    ADD COLUMN error_lineno integer;
