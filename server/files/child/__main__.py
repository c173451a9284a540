"""One file process (processes.py): it makes the operations the worker
sends over its socket (protocol.py), one at a time, and answers each. It
imports only the store, so that each process stays small.

    python -m server.files.child FD SETTINGS
"""
import json
import logging
import os
import pickle
import signal
import socket
import sys

from ...errors import Refused
from ..store import Limits, Store
from .protocol import frame, operation, read_exactly

log = logging.getLogger(__name__)

NICE = 5  # below the worker's IOLoop, above students' programs (10)


def main(fd, settings):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl+C reaches the worker, which closes us
    os.nice(NICE)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s file process %(process)d %(levelname)s %(message)s")
    settings = json.loads(settings)
    sock = socket.socket(fileno=fd)
    # Making the store touches the storage: while it hangs, this waits here,
    # and the worker sends no call to a process that has not said it is ready.
    try:
        store = Store(settings["root"], Limits(**settings["limits"]))
    except OSError:
        return  # the storage fails (EIO ...): the worker says so, once per streak, and tries again
    sock.sendall(frame((True, "ready")))
    while True:
        head = read_exactly(sock, 4)
        body = head and read_exactly(sock, int.from_bytes(head, "big"))
        if body is None:
            return  # the worker closed the socket
        op, args = pickle.loads(body)
        try:
            answer = frame((True, operation(op)(store, *args)))
        except Exception as e:  # raised in the worker as the call's own
            if not isinstance(e, (Refused, OSError)):
                log.exception("file operation %r failed", op)  # its traceback stays here
            try:
                answer = frame((False, e))
            except Exception:  # it does not pickle: the worker still gets an answer
                answer = frame((False, RuntimeError(f"file operation {op!r} failed: {e!r}")))
        sock.sendall(answer)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
