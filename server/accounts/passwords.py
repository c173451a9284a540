"""Password hashing (the rules passwords follow are in rules.py).

argon2id at OWASP's minimum (m=19 MiB, t=2, p=1): 25-30 ms of one core per
hash on the 2-core test machine, so 60 logins at once finish in 0.7-0.9 s
(`python -m loadtest.bench_login`), while each guess costs an attacker
19 MiB and two passes. bcrypt at cost 10 costs more CPU for less memory
hardness, and a higher argon2 cost would push a class's login past 1 s. The hash is
pure CPU and releases the GIL, so callers run it in a thread pool (never on
the IOLoop). Parameters are stored inside each hash, so raising them later
only needs `needs_rehash` at the next login.
"""
import secrets

from argon2 import PasswordHasher, Type
from argon2.exceptions import InvalidHashError, VerificationError

HASHER = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1,
                        hash_len=32, salt_len=16, type=Type.ID)
# Easy to read aloud in a classroom: no 0/o, 1/l/i.
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_dummy_hash = None
# The hash of an account that signs in with a school account (server/signin/):
# no password matches it; an admin's password reset gives it one.
NO_PASSWORD = "!school-account"


def hash_password(password):
    return HASHER.hash(password)


def verify_password(password_hash, password):
    """True when `password` matches; never raises for a bad or foreign hash."""
    try:
        return HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def verify_unknown_user(password):
    """Spend the time a real verification takes, so timing does not reveal which
    usernames exist."""
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = HASHER.hash(secrets.token_hex(16))
    verify_password(_dummy_hash, password)
    return False


def needs_rehash(password_hash):
    try:
        return HASHER.check_needs_rehash(password_hash)
    except InvalidHashError:
        return True


def generate_password():
    """A random password like `k7dm-qx3p-w9ta` (about 74 bits)."""
    return "-".join("".join(secrets.choice(_ALPHABET) for _ in range(4)) for _ in range(3))
