"""Running students' programs: sandboxes, admission, the WebSocket."""
