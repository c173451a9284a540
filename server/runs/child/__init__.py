"""Code in this folder runs in a process of its own, not in the worker: the
launcher (launcher.py) inside every sandbox, beside the student's program,
and the builder of the seccomp filter (seccomp_filter.py), run once with
the sandbox's Python. Each file stands alone: it imports nothing of the
server, since the sandbox is given its source, not the server's package."""
