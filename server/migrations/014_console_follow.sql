-- A student's detail (teaching/consoles.py, following.py, viewing.py). All
-- three tables hold only what is live: UNLOGGED (no WAL), so a crash of
-- PostgreSQL empties them, and the view fills again as things happen.

-- The teachers' sockets that follow a student's console, renewed while they
-- do: a worker writes the console of a student it runs only while a row
-- here names them and `until` is to come.
CREATE UNLOGGED TABLE console_follow (
    follower text PRIMARY KEY,  -- one teacher's socket: its worker and number
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    until timestamptz NOT NULL
);
CREATE INDEX console_follow_user_id ON console_follow (user_id);

-- The console of each followed student's current or last run, as the
-- worker that runs it last wrote it. started_at orders the runs: the
-- console of an older run never overwrites a newer one's.
CREATE UNLOGGED TABLE run_console (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    worker text NOT NULL,
    started_at timestamptz NOT NULL,
    output jsonb NOT NULL,  -- [[stream, text], ...], the tail of the terminal
    cut boolean NOT NULL,  -- earlier output was left out
    figures jsonb,  -- [base64 PNG, ...], the last few
    figures_id text,  -- changes whenever the figures do
    running boolean NOT NULL,
    waiting boolean NOT NULL,  -- in input()
    exit jsonb,  -- {reason, message, explanation?} once it ended
    changed_at timestamptz NOT NULL DEFAULT now()
);

-- The file each student has in front of them in the IDE (a path of their
-- home; NULL: none), for the roster.
CREATE UNLOGGED TABLE viewing (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    path text,
    at timestamptz NOT NULL
);

-- A follow that starts (or moves to another student) is announced on
-- 'console_follow' with the student's id: every worker writes their console
-- once. Each write of a console is announced on 'run_console'; a new
-- open file, on 'class_live' as the roster's other changes are.
CREATE FUNCTION notify_user_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], NEW.user_id::text);  -- the channel is the trigger's argument
    RETURN NULL;
END $$;

CREATE TRIGGER console_follow_started AFTER INSERT OR UPDATE OF user_id ON console_follow FOR EACH ROW
    EXECUTE FUNCTION notify_user_id('console_follow');
CREATE TRIGGER run_console_written AFTER INSERT OR UPDATE ON run_console FOR EACH ROW
    EXECUTE FUNCTION notify_user_id('run_console');
CREATE TRIGGER viewing_class_live AFTER INSERT ON viewing FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
CREATE TRIGGER viewing_changed_class_live AFTER UPDATE ON viewing FOR EACH ROW
    WHEN (OLD.path IS DISTINCT FROM NEW.path)
    EXECUTE FUNCTION notify_class_live();
