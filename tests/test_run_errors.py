"""The error of a failed run, read from its stderr (runs/events.py
`run_error`) for the class view's tiles and groups: the exception's kind
and message, and the file and line of the innermost frame in the student's
own files. The tracebacks are real: the student's files are run by this
Python in a folder named as a home is (…/home/<username>/)."""
import subprocess
import sys
import textwrap

import pytest

from server.runs.events import run_error


@pytest.fixture
def home(tmp_path):
    folder = tmp_path / "home" / "ada"
    folder.mkdir(parents=True)
    return folder


def stderr_of(home, files, main):
    """What Python writes to stderr running `main` of `files` in the home."""
    for name, code in files.items():
        (home / name).write_text(textwrap.dedent(code))
    done = subprocess.run([sys.executable, str(home / main)], cwd=home, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done
    return done.stderr


def test_a_name_error_at_module_level(home):
    err = stderr_of(home, {"lesson2.py": "words = ['a', 'b']\n\n\nprint(lenght(words))\n"}, "lesson2.py")
    assert run_error(err, "ada") == {
        "kind": "NameError", "message": "name 'lenght' is not defined", "file": "lesson2.py", "line": 4,
        "text": "NameError: name 'lenght' is not defined"}


def test_inside_a_function_in_another_of_the_students_files(home):
    (home / "lib").mkdir()
    err = stderr_of(home, {"main.py": "from lib.shapes import area\nprint(area(3))\n",
                           "lib/shapes.py": "def area(side):\n    return side * sidee\n"}, "main.py")
    found = run_error(err, "ada")
    assert (found["kind"], found["file"], found["line"]) == ("NameError", "lib/shapes.py", 2)
    assert found["message"].startswith("name 'sidee' is not defined")


def test_a_syntax_error(home):
    err = stderr_of(home, {"main.py": "x = 1\nprint(x\n"}, "main.py")
    found = run_error(err, "ada")
    assert (found["kind"], found["file"], found["line"]) == ("SyntaxError", "main.py", 2)
    assert found["message"] == "'(' was never closed"


def test_an_error_raised_in_the_standard_library_names_the_students_line(home):
    err = stderr_of(home, {"main.py": "import json\n\ndata = json.loads('{')\n"}, "main.py")
    assert "json/decoder.py" in err  # the library's frames are there, below the student's
    found = run_error(err, "ada")
    assert (found["kind"], found["file"], found["line"]) == ("json.decoder.JSONDecodeError", "main.py", 3)
    assert found["message"].startswith("Expecting property name")


def test_keyboard_interrupt(home):
    code = "import os, signal, time\n\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n"
    err = stderr_of(home, {"main.py": code}, "main.py")
    found = run_error(err, "ada")
    assert (found["kind"], found["message"], found["text"]) == ("KeyboardInterrupt", "", "KeyboardInterrupt")
    assert found["file"] == "main.py" and found["line"] in (3, 4)


def test_chained_exceptions_give_the_last_ones_place(home):
    code = """\
        prices = {"apple": 3}


        def price(name):
            try:
                return prices[name]
            except KeyError:
                raise ValueError(f"no price for {name}")


        print(price("pear"))
        """
    err = stderr_of(home, {"shop.py": code}, "shop.py")
    assert "During handling of the above exception" in err and "KeyError" in err
    found = run_error(err, "ada")
    assert found == {"kind": "ValueError", "message": "no price for pear", "file": "shop.py", "line": 8,
                     "text": "ValueError: no price for pear"}


def test_the_sandboxs_home_and_no_frame_of_the_student():
    sandboxed = ('Traceback (most recent call last):\n  File "/home/student/week 3/a.py", line 7, in <module>\n'
                 '    f()\n  File "/usr/lib/python3.11/random.py", line 9, in f\nIndexError: list index out of range\n')
    found = run_error(sandboxed, "ada")
    assert (found["file"], found["line"], found["kind"]) == ("week 3/a.py", 7, "IndexError")
    quoted = 'Traceback (most recent call last):\n  File "/home/student/say "hi".py", line 2, in <module>\nOSError: x\n'
    assert run_error(quoted, "ada")["file"] == 'say "hi".py'
    # Only a library's frames (another user's home is not this student's).
    only_library = 'Traceback (most recent call last):\n  File "/home/bob/x.py", line 2, in <module>\nOSError: no\n'
    assert run_error(only_library, "ada")["file"] is None


def test_what_is_not_a_traceback():
    assert run_error("", "ada") is None
    assert run_error("\n  \n", "ada") is None
    assert run_error("some output\nwent wrong here\n\n", "ada") == {
        "kind": None, "message": None, "file": None, "line": None, "text": "went wrong here"}
    # A forged traceback is read as any other: only its own tile shows it.
    forged = 'Traceback (most recent call last):\n  File "/home/student/<b>x</b>.py", line 999999999999\n' \
             "KeyError: <img src=x onerror=alert(1)>\n"
    found = run_error(forged, "ada")
    assert (found["kind"], found["message"], found["file"]) == ("KeyError", "<img src=x onerror=alert(1)>", None)
    # Bounded work on a huge stderr: only its end is read.
    assert run_error("x" * 10_000_000 + "\nValueError: end\n", "ada")["kind"] == "ValueError"
