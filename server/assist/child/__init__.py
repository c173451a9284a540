"""Code in this folder runs in a process of its own, not in the worker: an
assist process, walled in (../jail.py copies these files into the jail and
starts `python -m server.assist.child`), which answers the editing help's
requests of the pool (../pool.py). Nothing in the worker imports it.

    __main__.py   the process: its line protocol, limits and priority
    engine.py     completions, signatures, descriptions (jedi), diagnostics (pyflakes)
    ranking.py    the order completions are offered in
"""
