"""What the WebSocket handlers share (/ws/class, /ws/run): refusing an
upgrade with a JSON answer, reading a client's message, answering what it
did wrong with an `error` message, and sending a JSON message to a socket
that may be closing."""
import json
import logging

from tornado import websocket

from .errors import Refused
from .web import expected_error

log = logging.getLogger(__name__)


def refuse(handler: websocket.WebSocketHandler, refusal: Exception) -> None:
    """Answer the upgrade request with `refusal` (a Refused or ApiError) as
    `{"error", "message"}` and its status, instead of upgrading."""
    answer = expected_error(refusal)
    handler.set_status(answer.status_code)
    if answer.retry_after:
        handler.set_header("Retry-After", str(answer.retry_after))
    handler.set_header("Content-Type", "application/json; charset=utf-8")
    handler.finish(json.dumps({"error": answer.code, "message": answer.message}))


async def send_json(handler: websocket.WebSocketHandler, message: dict) -> None:
    """Send `message`, unless the socket is closing (its on_close does the rest)."""
    if handler.ws_connection is None or handler.ws_connection.is_closing():
        return
    try:
        await handler.write_message(json.dumps(message))
    except websocket.WebSocketClosedError:
        pass


def message_of(text) -> dict:
    """A client's message: a JSON object with a text `type`, else Refused."""
    try:
        msg = json.loads(text)
    except (ValueError, RecursionError):
        msg = None
    if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
        raise Refused(400, "bad_message", "Messages are JSON objects with a \"type\".")
    return msg


async def answering(send, act, doing: str) -> None:
    """Await `act()`; what it refuses is sent as an `error` message, and
    anything else it raises is logged and said plainly: the socket stays open."""
    try:
        await act()
    except Refused as e:
        await send({"type": "error", "error": e.code, "message": e.message})
    except Exception:
        log.exception("%s failed", doing)
        await send({"type": "error", "error": "internal_error",
                    "message": "Something went wrong on the server. It has been logged."})
