-- Classes: groups of students that teachers own. The roster, the live view,
-- pushes and the course folder work per class. An account in no class is in
-- the default class, so a school that never makes classes (and everyone
-- here before this release) carries on as one class.
CREATE TABLE classes (
    id bigserial PRIMARY KEY,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    is_default boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX classes_name ON classes (lower(name));  -- 7B and 7b are one class
CREATE UNIQUE INDEX classes_one_default ON classes (is_default) WHERE is_default;
INSERT INTO classes (name, is_default) VALUES ('Default class', true);

-- Who teaches or is in each class (the user's role says which).
CREATE TABLE class_members (
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (class_id, user_id)
);
CREATE INDEX class_members_user_id ON class_members (user_id);

-- Everyone's classes, the default one included: the one definition every
-- statement that asks "who is in this class" uses.
CREATE VIEW class_membership AS
    SELECT m.class_id, m.user_id FROM class_members m
    UNION ALL
    SELECT c.id, u.id FROM classes c CROSS JOIN users u
    WHERE c.is_default AND u.role <> 'admin'
      AND NOT EXISTS (SELECT 1 FROM class_members m WHERE m.user_id = u.id);

-- What a push put into a student's home (the etag of the starter as
-- pushed), so pushing an updated starter replaces the copies students have
-- not changed and leaves the others.
CREATE TABLE pushed_files (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    path text NOT NULL,
    etag text NOT NULL,
    pushed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path)
);

-- The live class view. Open IDE sockets per user and worker, kept fresh by
-- the worker's heartbeat: a row whose heartbeat is old is a worker that died.
CREATE TABLE presence (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    worker text NOT NULL,
    sockets integer NOT NULL CHECK (sockets > 0),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, worker)
);
CREATE INDEX presence_worker ON presence (worker);

-- Each user's program: running or not (on which worker), and how the last
-- run ended. changed_at is when the event happened: a late write of an
-- older event never overwrites a newer one.
CREATE TABLE run_activity (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    running boolean NOT NULL,
    worker text,
    started_at timestamptz,
    ended_at timestamptz,
    outcome text CHECK (outcome IN ('ok', 'error', 'limit', 'stopped')),
    reason text,
    error_line text,
    changed_at timestamptz NOT NULL
);

-- Every change the live view shows is announced on the channel
-- 'class_live' with the user's id, on commit, whoever made it (a save
-- recorded by the files service, a run, a socket, the admin).
CREATE FUNCTION notify_class_live() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('class_live', (CASE WHEN TG_OP = 'DELETE' THEN OLD.user_id ELSE NEW.user_id END)::text);
    RETURN NULL;
END $$;

CREATE FUNCTION notify_class_live_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('class_live', NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER users_class_live AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.last_save_at IS DISTINCT FROM NEW.last_save_at OR OLD.disk_bytes IS DISTINCT FROM NEW.disk_bytes
          OR OLD.disk_files IS DISTINCT FROM NEW.disk_files OR OLD.active IS DISTINCT FROM NEW.active
          OR OLD.display_name IS DISTINCT FROM NEW.display_name)
    EXECUTE FUNCTION notify_class_live_user();
CREATE TRIGGER run_activity_class_live AFTER INSERT OR UPDATE ON run_activity FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
CREATE TRIGGER presence_class_live AFTER INSERT OR DELETE ON presence FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
CREATE TRIGGER presence_sockets_class_live AFTER UPDATE ON presence FOR EACH ROW
    WHEN (OLD.sockets IS DISTINCT FROM NEW.sockets)
    EXECUTE FUNCTION notify_class_live();
CREATE TRIGGER class_members_class_live AFTER INSERT OR DELETE ON class_members FOR EACH ROW
    EXECUTE FUNCTION notify_class_live();
