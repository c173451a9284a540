-- Login throttling fit for a class behind one school address (see
-- server/auth/throttle.py). login_failures stays for the previous release's
-- code; this release no longer writes it.

-- Per username (existing or not): attempts counted since the last success
-- or quiet window, and until when the next one must wait.
CREATE TABLE login_attempts (
    username text PRIMARY KEY,
    failures integer NOT NULL DEFAULT 0,
    last_at timestamptz NOT NULL DEFAULT '-infinity',
    blocked_until timestamptz NOT NULL DEFAULT '-infinity'
);
CREATE INDEX login_attempts_last_at ON login_attempts (last_at);

-- Per client address: the distinct usernames it failed to log in as, and
-- when it last did; a typo-prone student counts once, a sprayer per name.
CREATE TABLE login_address_names (
    address text NOT NULL,
    username text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (address, username)
);
CREATE INDEX login_address_names_address_at ON login_address_names (address, at);
