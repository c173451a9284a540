"""Putting accounts into classes by name, as an import of a class list
does (its `class` column), in the transaction that makes the accounts.
The rest of classes (who teaches what, who may reach what) is teaching's
(teaching/classes.py); this is here so that accounts need nothing of it."""
from ..errors import Refused
from . import rules
from .audit import audit


def valid_name(name: str) -> str:
    """A class's name as it is kept (trimmed), or Refused 400 saying what is wrong with it."""
    name = name.strip() if isinstance(name, str) else name
    problem = rules.class_name_problem(name)
    if problem:
        raise Refused(400, "invalid_name", problem[0].upper() + problem[1:] + ".")
    return name


async def join_by_name(conn, actor: str, members: dict[str, list[int]]) -> dict[str, int]:
    """In the caller's transaction: put users (ids) into classes by name,
    making the classes that do not exist yet (a class list's `class`
    column); {name: class id}."""
    ids = {}
    for name, user_ids in members.items():
        name = valid_name(name)
        row = await conn.fetchrow(
            "INSERT INTO classes (name) VALUES ($1) ON CONFLICT (lower(name)) DO NOTHING RETURNING id", name)
        if row is not None:
            await audit(conn, actor, "create_class", name, class_id=row["id"], source="import")
            ids[name] = row["id"]
        else:
            ids[name] = await conn.fetchval("SELECT id FROM classes WHERE lower(name) = lower($1)", name)
        await conn.execute(
            "INSERT INTO class_members (class_id, user_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING",
            ids[name], user_ids)
    return ids
