"""The import guard (server/runs/child/import_guard.py) on its own, in the
sandboxes' interpreter: once the launcher has set it up (guard_imports),
a forbidden module cannot be imported by any spelling without the process
ending with the guard's exit code, caught or not; a program that would
hide an import (another interpreter, ctypes, the collector's lists) ends
too; and what an innocent program imports is left alone.

The same through the real API and sandboxes: tests/test_checks.py."""
import os
import subprocess
import sys

import pytest

from server.runs.child import import_guard
from server.runs.sandbox.launch import IMPORT_GUARD_SOURCE, LAUNCHER_SOURCE

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable  # SANDBOX_PYTHON's default
TIMEOUT = 60  # only catches a hang

# The launcher's own code, loaded as a module (its main() does not run), sets
# the guard up as it does in a run's process; then the program runs.
HARNESS = """
import sys, types
launcher = types.ModuleType("launcher")
exec(compile(sys.argv[1], "launcher", "exec"), launcher.__dict__)
launcher.guard_imports({"forbid": {"code": sys.argv[2], "modules": sys.argv[3].split(",")}})
exec(compile(sys.argv[4], "/home/student/program.py", "exec"), {"__name__": "__main__"})
print("ran to its end")
"""


def run(modules, program):
    """(exit code, stdout, stderr) of `program` run with `modules` forbidden."""
    done = subprocess.run([PYTHON, "-I", "-B", "-c", HARNESS, LAUNCHER_SOURCE, IMPORT_GUARD_SOURCE,
                           ",".join(modules), program], capture_output=True, text=True, timeout=TIMEOUT)
    return done.returncode, done.stdout, done.stderr


SPELLINGS = {
    "statement": "import statistics",
    "from": "from statistics import mean",
    "computed": "__import__('statis' + 'tics')",
    "importlib": "import importlib\nimportlib.import_module('statis' + 'tics')",
    "exec": "exec('import ' + 'statistics')",
    "caught": "try:\n    __import__('statistics')\nexcept BaseException:\n    pass",
    "util": "import importlib.util as u\nspec = u.find_spec('statistics')\nm = u.module_from_spec(spec)\n"
            "spec.loader.exec_module(m)",
    "runpy": "import runpy\nrunpy.run_module('statistics')",
    "pkgutil": "import pkgutil\npkgutil.resolve_name('statistics:mean')",
    "its source": "import sysconfig\nns = {'__name__': 'mine'}\n"
                  "exec(open(sysconfig.get_paths()['stdlib'] + '/statistics.py').read(), ns)",
    "through a module": "import sys\nsys.modules.pop('random', None)\nimport importlib\n"
                        "importlib.import_module('random')",  # random imports statistics? no: see below
}
SPELLINGS.pop("through a module")  # random does not import statistics: covered with math below


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_forbidden_import_ends_the_program_however_it_is_spelled(spelling):
    code, out, err = run(["statistics"], SPELLINGS[spelling])
    assert code == import_guard.exit_code(0), (code, out, err)
    assert "ran to its end" not in out
    assert "Your program imported statistics while it ran" in err


def test_each_module_has_its_own_exit_code():
    code, _, err = run(["numpy", "statistics"], "import importlib\nimportlib.import_module('statistics')")
    assert code == import_guard.exit_code(1) and "imported statistics" in err


def test_a_module_compiled_into_the_interpreter_is_guarded_too_and_so_are_modules_importing_it():
    for program in ("import importlib\nimportlib.import_module('math')", "import random", "from math import sqrt"):
        code, _, err = run(["math"], program)
        assert code == import_guard.exit_code(0) and "imported math" in err, (program, code, err)


def test_a_submodule_and_a_module_loaded_before_the_guard_are_guarded():
    code, _, err = run(["json"], "import importlib\nimportlib.import_module('json')")  # the launcher had it
    assert code == import_guard.exit_code(0), err
    code, _, err = run(["json"], "import json.decoder")
    assert code == import_guard.exit_code(0), err


HIDING = {
    "another interpreter": "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import statistics'])",
    "os.system": "import os\nos.system('true')",
    "exec of a program": "import os\nos.execv('/bin/true', ['true'])",
    "ctypes": "import ctypes\nctypes.pythonapi.PyImport_ImportModule(b'statistics')",
    "the collector's lists": "import gc\n[o for o in gc.get_objects() if isinstance(o, list)]",
    "a sub-interpreter": "import _xxsubinterpreters as subs\nsubs.run_string(subs.create(), 'import statistics')",
}


@pytest.mark.parametrize("way", list(HIDING))
def test_a_program_that_could_hide_an_import_ends(way):
    code, out, err = run(["statistics"], HIDING[way])
    assert code == import_guard.EXIT_HIDDEN, (code, out, err)
    assert "ran to its end" not in out and "started another program" in err


def test_a_program_started_in_a_way_no_event_reports_is_refused_by_the_kernel():
    """multiprocessing's "spawn" starts an interpreter through
    _posixsubprocess, which raises no audit event: its execve fails."""
    program = ("import multiprocessing\n"
               "started = multiprocessing.get_context('spawn').Process(target=print, args=('the other one ran',))\n"
               "try:\n    started.start()\n    started.join()\nexcept OSError:\n    pass\n")
    code, out, err = run(["statistics"], program)
    assert "the other one ran" not in out + err, (code, out, err)
    assert code == 0 and "ran to its end" in out, (code, out, err)


def test_a_program_cannot_make_the_guard_lie():
    """Replaced builtins and a str that compares equal to nothing do not
    fool the hook: it reads no name at call time."""
    program = ("class Name(str):\n    def __eq__(self, other): return False\n"
               "    def startswith(self, *a): return False\n    __hash__ = str.__hash__\n"
               "import builtins\nbuiltins.isinstance = lambda *a: False\nbuiltins.str = bytes\n"
               "builtins.len = lambda x: 0\n__import__(Name('statistics'))")
    code, _, err = run(["statistics"], program)
    assert code == import_guard.exit_code(0), err


def test_an_innocent_program_runs_as_before():
    program = ("import random, fractions, decimal, json, csv, re, collections, itertools, dataclasses, typing\n"
               "import importlib\nimportlib.import_module('math')\nprint(sum([1, 2]))")
    code, out, err = run(["statistics"], program)
    assert code == 0 and "3\nran to its end" in out, (code, out, err)



def test_the_modules_files_cannot_be_read_by_a_path_the_hook_cannot_place():
    """Relative to a folder's descriptor, the open's path names no file the
    hook can find: the kernel (Landlock) refuses it. Nothing was imported,
    so the program goes on."""
    program = ("import os, sysconfig\nstdlib = sysconfig.get_paths()['stdlib']\n"
               "folder = os.open(os.path.dirname(stdlib), os.O_RDONLY)\n"
               "try:\n    os.open(os.path.basename(stdlib) + '/statistics.py', os.O_RDONLY, dir_fd=folder)\n"
               "except PermissionError:\n    print('refused')\nelse:\n    print('read it')\n"
               "print(len(open(stdlib + '/random.py').read()) > 0)")
    code, out, err = run(["statistics"], program)
    assert code == 0 and "refused\nTrue\nran to its end" in out, (code, out, err)
