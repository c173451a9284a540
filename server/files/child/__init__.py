"""Code in this folder runs in a process of its own, not in the worker: a
file process (processes.py starts them), which makes the store's calls the
worker sends over its socket, one at a time, and answers each.

    __main__.py   the process: `python -m server.files.child FD SETTINGS`
    protocol.py   what crosses the socket: the framing and the operations a
                  file process makes (the worker imports this too)
"""
