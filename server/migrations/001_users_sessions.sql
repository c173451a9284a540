-- Accounts, sessions, login throttling and the audit trail.
CREATE TABLE users (
    id bigserial PRIMARY KEY,
    username text NOT NULL UNIQUE
        CHECK (username ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    display_name text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 200),
    role text NOT NULL CHECK (role IN ('student', 'teacher', 'admin')),
    active boolean NOT NULL DEFAULT true,
    password_hash text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    password_changed_at timestamptz NOT NULL DEFAULT now()
);

-- A session is known only by the SHA-256 of its random token, so a copy of
-- this table cannot be used to log in.
CREATE TABLE sessions (
    token_hash bytea PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    client_address text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user_id ON sessions (user_id);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

-- One row per failed login, counted over a sliding window per username and
-- per client address; shared by every worker and instance.
CREATE TABLE login_failures (
    scope text NOT NULL CHECK (scope IN ('user', 'address')),
    key text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_scope_key_at ON login_failures (scope, key, at);

CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    actor text NOT NULL,
    action text NOT NULL,
    subject text NOT NULL DEFAULT '',
    detail jsonb NOT NULL DEFAULT '{}'
);
