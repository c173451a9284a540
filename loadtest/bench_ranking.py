"""Benchmark of completion ranking: on lines beginners type, is the name
they went on to type the first one offered (what Tab takes)?

    python -m loadtest.bench_ranking [--server-root DIR] [--json OUT]

Each case is a text up to the cursor and the name the student meant. The
editing-help engine of the checkout under test (this one, or --server-root,
say a worktree of an earlier commit) completes each in a process of its
own, with the sandbox interpreter's library (SANDBOX_PYTHON, default
/usr/bin/python3); the report gives how often the meant name is first,
in the first three, offered at all, and each miss with what came first.
"""
import argparse
import json
import os
import subprocess
import sys

from .cli import say, server_root_option, write_json
from .harness import server_root

CASES = [
    ("import random\nrandom.ra", "randint"),
    ("import random\nrandom.ch", "choice"),
    ("import random\nrandom.sh", "shuffle"),
    ("from random import ra", "randint"),
    ("import ra", "random"),
    ("import math\nmath.sq", "sqrt"),
    ("import math\nmath.fl", "floor"),
    ("import math\nmath.ce", "ceil"),
    ("import math\nr = 2\narea = math.p", "pi"),
    ("pri", "print"),
    ("name = inp", "input"),
    ("age = in", "int"),
    ("x = fl", "float"),
    ("name = input()\nname.up", "upper"),
    ("name = input()\nname.lo", "lower"),
    ("name = input()\nname.st", "strip"),
    ("words = 'a b c'.sp", "split"),
    ("text = 'hi'\ntext.re", "replace"),
    ("scores = []\nscores.ap", "append"),
    ("scores = []\nscores.so", "sort"),
    ("scores = [1, 2]\nprint(le", "len"),
    ("for i in ra", "range"),
    ("scores = [1, 2]\ntotal = su", "sum"),
    ("scores = [1, 2]\nfor i, s in en", "enumerate"),
    ("ages = {}\nfor name, age in ages.it", "items"),
    ("ages = {}\nages.ke", "keys"),
    ("import time\ntime.sl", "sleep"),
    ("import matplotlib.pyplot as plt\nplt.pl", "plot"),
    ("import matplotlib.pyplot as plt\nplt.sh", "show"),
    ("import matplotlib.pyplot as plt\nplt.ti", "title"),
    ("import matplotlib.pyplot as plt\nplt.xl", "xlabel"),
    ("import numpy as np\nnp.ar", "array"),
    ("import numpy as np\nnp.li", "linspace"),
    ("def average(numbers):\n    return sum(numbers) / len(numbers)\n\nprint(av", "average"),
    ("highscore = 0\nscore = 5\nif score > hi", "highscore"),
    ("def greet(name):\n    print('Hi', name)\n\ngr", "greet"),
    ("wh", "while"),
    ("while True:\n    br", "break"),
    ("import turtle\nturtle.fo", "forward"),
    ("import turtle\nturtle.le", "left"),
]

# Runs in a process of its own, with the checkout under test first on sys.path.
CHILD = """
import json, sys, tempfile
from server.assist.child.engine import Engine
engine = Engine(sys.argv[1], tempfile.mkdtemp())
out = []
for source, _ in json.load(sys.stdin):
    lines = source.split("\\n")
    answer = engine.handle({"op": "complete", "source": source, "path": "lesson.py", "project": "0" * 16,
                            "files": {}, "line": len(lines), "column": len(lines[-1])})
    out.append([c["name"] for c in answer["completions"]])
json.dump(out, sys.stdout)
"""


def measure(root, python):
    done = subprocess.run([sys.executable, "-c", CHILD, python], input=json.dumps(CASES), capture_output=True,
                          text=True, cwd=root, env={**os.environ, "PYTHONPATH": root}, timeout=600, check=True)
    offered = json.loads(done.stdout)
    rows = []
    for (source, meant), names in zip(CASES, offered):
        place = names.index(meant) + 1 if meant in names else None
        rows.append({"text": source.split("\n")[-1], "meant": meant, "place": place, "first": names[:1]})
    n = len(rows)
    return {"cases": n, "first": sum(r["place"] == 1 for r in rows) / n,
            "top3": sum(r["place"] is not None and r["place"] <= 3 for r in rows) / n,
            "offered": sum(r["place"] is not None for r in rows) / n, "rows": rows}


def report(root, result):
    print(f"completion ranking of {root}: {result['cases']} beginner lines")
    print(f"  the meant name first: {result['first']:.0%}, in the first three: {result['top3']:.0%}, "
          f"offered: {result['offered']:.0%}")
    for row in result["rows"]:
        if row["place"] != 1:
            print(f"  {row['text']!r:40} meant {row['meant']!r}, place {row['place']}, first {row['first']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    server_root_option(parser)
    parser.add_argument("--python", default=os.environ.get("SANDBOX_PYTHON", "/usr/bin/python3"),
                        help="the interpreter whose library is completed (default: SANDBOX_PYTHON or /usr/bin/python3)")
    parser.add_argument("--json", metavar="OUT", help="also write every figure to this file")
    args = parser.parse_args(argv)
    root = server_root()
    say(f"completing {len(CASES)} lines with the engine of {root}")
    result = measure(root, args.python)
    report(root, result)
    if args.json:
        write_json(args.json, {"server_root": root, **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
