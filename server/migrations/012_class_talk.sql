-- Talking to the class (issue 24): what a teacher broadcasts to a class or
-- to some of its students, and the students' raised hands.

-- A message, with the students it was for (as they were when it was sent),
-- so that a student who opens the IDE a little later still sees it. The
-- sender's name is kept as it was shown. Old messages are removed as new
-- ones are sent (teaching/talk.py).
CREATE TABLE class_messages (
    id bigserial PRIMARY KEY,
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    sender_id bigint REFERENCES users (id) ON DELETE SET NULL,
    sender_name text NOT NULL,
    body text NOT NULL CHECK (length(body) BETWEEN 1 AND 500),
    recipients bigint[] NOT NULL,
    whole_class boolean NOT NULL,
    sent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX class_messages_class_sent ON class_messages (class_id, sent_at);
CREATE INDEX class_messages_sent ON class_messages (sent_at);

-- One row per student and class: whether their hand is up (and since when,
-- why, where), and how many times they raised it in the current window
-- (the rate limit is per student, never per address: a class shares one).
CREATE TABLE hands (
    class_id bigint NOT NULL REFERENCES classes (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    up boolean NOT NULL,
    raised_at timestamptz NOT NULL,
    note text NOT NULL DEFAULT '' CHECK (length(note) <= 200),
    file text CHECK (length(file) <= 300),
    line integer CHECK (line > 0),
    window_at timestamptz NOT NULL,
    raises integer NOT NULL,
    PRIMARY KEY (class_id, user_id)
);
CREATE INDEX hands_up ON hands (class_id, raised_at) WHERE up;

-- Every change to a class's hands is announced on 'class_hands' with the
-- class's id, on commit: the teachers' live sockets read the queue again.
CREATE FUNCTION notify_class_hands() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('class_hands', (CASE WHEN TG_OP = 'DELETE' THEN OLD.class_id ELSE NEW.class_id END)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER hands_changed AFTER INSERT OR UPDATE OR DELETE ON hands FOR EACH ROW
    EXECUTE FUNCTION notify_class_hands();
