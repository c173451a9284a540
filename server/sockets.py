"""What the WebSocket handlers share (/ws/class; /ws/run may use it too):
refusing an upgrade with a JSON answer, and sending a JSON message to a
socket that may be closing."""
import json

from tornado import websocket

from .web import expected_error


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
