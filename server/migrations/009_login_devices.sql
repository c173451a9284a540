-- Login throttling with device cookies (server/accounts/throttle.py).
--
-- An address's failed names now say whether the account exists: only
-- failures on real accounts can bar an address from new names; made-up
-- names never lock a class out. Rows from before count as real accounts.
ALTER TABLE login_address_names ADD COLUMN account_exists boolean NOT NULL DEFAULT true;

-- login_attempts also counts the failures of a browser that has signed in
-- as the user before, under 'device:<nonce>' (no username holds a ':').
