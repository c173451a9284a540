"""One assist process: `python -m server.assist.child --python P --folder F`.

It is started by the pool (../pool.py), warms up, says `{"ready": true}` and
then answers one JSON request per line on stdin with one JSON line on
stdout, in order, until stdin closes. It runs walled in (../jail.py), never as
root, at a lower CPU priority than the server, with an address-space limit
(and a cgroup's, as root); the pool kills it (its whole process group: jedi's subprocess too) when a
request outlives its deadline.
"""
import argparse
import json
import logging
import os
import resource
import sys

MEMORY_BYTES = 2 << 30  # address space: a warm process maps ~150 MB
NICE = 10

log = logging.getLogger("server.assist.child")


def answers():
    """A private copy of stdout for the answers; fd 1 then goes to stderr,
    so nothing a library prints can break the line protocol."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8", errors="surrogatepass", newline="\n")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", required=True, help="the interpreter whose library jedi describes")
    parser.add_argument("--folder", required=True, help="this process's own folder (copies, caches)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"assist[{os.getpid()}] %(levelname)s %(message)s")
    out = answers()
    os.makedirs(args.folder, mode=0o700, exist_ok=True)
    os.nice(NICE)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))

    import jedi  # after the limits: importing it and warming up are the first work
    jedi.settings.cache_directory = os.path.join(args.folder, "cache")
    from .engine import BadRequest, Engine
    engine = Engine(args.python, args.folder)
    engine.warm()
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"id": request["id"], "result": engine.handle(request)}
        except BadRequest as e:
            answer = {"id": request["id"], "error": str(e)}
        except Exception as e:  # jedi or pyflakes on odd text: no help is the answer
            log.warning("%s failed: %r", request.get("op"), e)
            answer = {"id": request["id"], "error": "failed"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
