"""Runners: processes, on this host or others, that run students' programs
for the web tier and hold none of its secrets (`python -m server.runner`).

The web tier keeps the WebSockets, admission and every decision; with
SANDBOX=remote its sandbox kind (runs/sandbox/remote.py) asks a runner of
RUNNERS for each sandbox over an authenticated WebSocket (runs/sandbox/tickets.py) and
relays the launcher's frames (service.py). Homes are read and written by
the runner in the shared storage, by their path under STORAGE_ROOT.
"""
