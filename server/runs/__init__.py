"""Running students' programs: jobs (job.py) for whoever asks, the IDE sockets (manager.py, handlers.py), sandboxes."""
