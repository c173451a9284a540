-- Sign-in with the school's accounts (OpenID Connect, issue 34).
--
-- An account's school address: what an issuer's first sign-in of a person
-- may be matched by (once: from then on the binding below decides).
ALTER TABLE users ADD COLUMN email text CHECK (email IS NULL OR length(email) BETWEEN 3 AND 254);
CREATE UNIQUE INDEX users_email ON users (lower(email)) WHERE email IS NOT NULL;

-- Who is who: a person of an issuer (its `sub`, never an e-mail address)
-- is one account.
CREATE TABLE signin_bindings (
    issuer text NOT NULL,
    subject text NOT NULL,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email text NOT NULL DEFAULT '',  -- the address the issuer last gave, for the admin's eyes
    bound_at timestamptz NOT NULL DEFAULT now(),
    last_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX signin_bindings_user ON signin_bindings (user_id);

-- A sign-in under way: what the browser's redirect back must match. Used
-- once (deleted when it comes back) and short-lived.
CREATE TABLE signin_flows (
    state_hash bytea PRIMARY KEY,
    issuer text NOT NULL,          -- the configured issuer's slug
    nonce text NOT NULL,
    verifier text NOT NULL,        -- PKCE's code_verifier
    redirect_uri text NOT NULL,
    next text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signin_flows_created ON signin_flows (created_at);
