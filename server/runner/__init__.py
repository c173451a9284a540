"""Runners: processes, on this host or others, that run students' programs
for the web tier and hold none of its secrets (`python -m server.runner`).

The web tier keeps the WebSockets, admission and every decision; with
SANDBOX=remote its sandbox kind (runs/sandbox/remote.py) asks a runner of
RUNNERS for each sandbox over an authenticated WebSocket (runs/sandbox/tickets.py) and
relays the launcher's frames (service.py). A runner never reaches the
storage: before a run the web tier sends the home's files that changed,
and after it takes back what the run changed (runs/shipping.py; the
runner's side: homes.py).
"""
