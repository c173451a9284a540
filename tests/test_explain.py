"""The plain sentence under a traceback (server/runs/explain.py), for the
errors beginners meet most: each program below is run by the sandbox's
python3 and its real stderr explained; and any text a program could write
(it controls its stderr) gives a bounded sentence or none, never an error."""
import os
import subprocess
import tempfile

import pytest
from hypothesis import given, settings, strategies as st

from server.runs.explain import explain

CASES = [
    # (program, words the sentence must hold)
    ('message = "hi"\nprnt(message)\n', ["Line 2 of main.py", "prnt", "Did you mean print?"]),
    ("print(total)\n", ["Line 1 of main.py", "does not know the name total", "spelling"]),
    ("x = 3\nif x > 2\n    print(x)\n", ["Line 2 of main.py", "colon"]),
    ('print("hi"\n', ["Line 1 of main.py", "bracket (", "never closed", "Add the missing )"]),
    ('print("hi)\n', ["Line 1 of main.py", "quote"]),
    ("for i in range(3):\nprint(i)\n", ["Line 2 of main.py", "indented", "for on line 1"]),
    ("x = 1\n    y = 2\n", ["Line 2 of main.py", "Remove the spaces"]),
    ('age = 14\nprint("You are " + age)\n', ["Line 2 of main.py", "adding text and a number", "str("]),
    ('n = "3"\nprint(n + 1)\n', ["Line 2 of main.py", "text and a number"]),
    ('n = "3"\nprint(2 * n - 1)\n', ["Line 2 of main.py", "int(...)"]),
    ('n = int("five")\n', ["Line 1 of main.py", "int()", "'five'", "digits"]),
    ('x = float("a lot")\n', ["Line 1 of main.py", "float()"]),
    ("print(10 / 0)\n", ["Line 1 of main.py", "divides by zero"]),
    ("items = [1, 2, 3]\nprint(items[3])\n", ["Line 2 of main.py", "position", "start at 0"]),
    ('ages = {"ada": 14}\nprint(ages["bob"])\n', ["Line 2 of main.py", "no key 'bob'"]),
    ('name = "ada"\nprint(name.lenght)\n', ["Line 2 of main.py", "len(name)"]),
    ("import random\nprint(random.randit(1, 6))\n", ["Line 2 of main.py", "module random", "Did you mean randint?"]),
    ("import pygame\n", ["Line 1 of main.py", "no module named pygame"]),
    ("def f(n):\n    return f(n + 1)\n\nf(1)\n", ["Line 2 of main.py", "calling itself"]),
    ('open("scores.txt")\n', ["Line 1 of main.py", "no file 'scores.txt'"]),
    ("def add(a, b):\n    return a + b\n\nadd(1)\n", ["Line 4 of main.py", "add()", "number of values"]),
]


def stderr_of(program):
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "main.py"), "w") as f:
            f.write(program)
        return subprocess.run(["/usr/bin/python3", "main.py"], capture_output=True, text=True, cwd=folder,
                              timeout=30).stderr.replace(folder, "/home/student")


@pytest.mark.parametrize("program, words", CASES, ids=[c[0].split("\n")[-2][:30] for c in CASES])
def test_each_common_error_gets_a_plain_sentence(program, words):
    stderr = stderr_of(program)
    sentence = explain(stderr)
    for word in words:
        assert word in sentence, (stderr, sentence)
    assert sentence.endswith((".", "?")) and len(sentence) < 400


def test_a_clean_ending_or_a_plain_message_gets_nothing():
    assert explain("") == ""
    assert explain("hello\nworld\n") == ""
    assert explain("Error: my program says so\n") == ""  # not a traceback


def test_frames_outside_the_students_files_do_not_name_a_line():
    stderr = 'Traceback (most recent call last):\n  File "/usr/lib/python3.11/random.py", line 3\nValueError: x\n'
    assert explain(stderr).startswith("A value was not right")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000), st.sampled_from(["", "Traceback (most recent call last):\n"]),
       st.sampled_from(["", '  File "/home/student/a.py", line 7, in <module>\n']),
       st.one_of(st.text(max_size=400), st.sampled_from(["print(x)", "x = x + 1", "else if x:", "print 'a' + b",
                                                         "def f:", "a b = 1", "class = 1", "x.push(1)"])),
       st.sampled_from(["NameError", "SyntaxError", "TypeError", "ValueError", "KeyError", "AttributeError",
                        "IndentationError", "ModuleNotFoundError", "IndexError", "ImportError", "x" * 100]))
def test_whatever_a_program_writes_gives_a_bounded_sentence(noise, head, frame, source, kind):
    """The error's message and the source line its traceback quotes are both the program's to write."""
    quoted = f"    {source}\n" if frame else ""
    sentence = explain(head + frame + quoted + f"{kind}: {noise}")
    assert isinstance(sentence, str) and len(sentence) < 600
    assert "\n" not in sentence


TEMPLATES = ["NameError: name '{w}' is not defined", "NameError: name '{w}' is not defined. Did you mean: '{v}'?",
             "AttributeError: '{w}' object has no attribute '{v}'",
             "AttributeError: module '{w}' has no attribute '{v}'",
             "ModuleNotFoundError: No module named '{w}'", "ImportError: cannot import name '{w}' from '{v}' (x)",
             "TypeError: '{w}' object is not callable", "TypeError: {w}() takes 1 positional argument but 2 were given",
             "ValueError: invalid literal for int() with base 10: '{v}'", "SyntaxError: Missing parentheses in call to "
             "'print'. Did you mean print(...)?", "SyntaxError: expected ':'", "SyntaxError: invalid syntax",
             "SyntaxError: unterminated string literal (detected at line 1)", "KeyError: '{v}'"]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TEMPLATES), st.from_regex(r"\A\w{1,80}\Z"), st.text(max_size=300),
       st.text(max_size=300))
def test_a_forged_error_of_a_known_kind_gives_a_bounded_sentence(template, word, value, source):
    """Names, values and the quoted line come from the program: each is matched and cut short, never trusted."""
    source = source.replace("\n", " ").replace("\r", " ")
    value = value.replace("\n", " ").replace("\r", " ")
    stderr = ('Traceback (most recent call last):\n  File "/home/student/main.py", line 3, in <module>\n'
              f"    {source} {word}({value})\n" + template.format(w=word, v=value) + "\n")
    sentence = explain(stderr)
    assert sentence.startswith("Line 3 of main.py: ") and sentence.endswith((".", "?"))
    assert "\n" not in sentence and len(sentence) < 600
