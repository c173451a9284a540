"""Where students' programs are placed: the runners that registered with
the web tier (registry: their heartbeats in PostgreSQL; handlers: the
heartbeat's endpoint). The remote sandbox kind (runs/sandbox/remote.py)
asks the registry which runners are alive and how busy."""
