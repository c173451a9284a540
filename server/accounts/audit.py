"""The audit trail: every change to accounts and classes, written in the
same transaction as the change itself."""
import json


async def audit(conn, actor, action, subject="", **detail):
    await conn.execute("INSERT INTO audit_log (actor, action, subject, detail) VALUES ($1, $2, $3, $4)",
                       actor, action, subject, json.dumps(detail))
