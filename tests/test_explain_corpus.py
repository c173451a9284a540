"""Every beginner mistake of tests/explain_corpus.toml is run for real by
python3 beside its other files (as the sandbox runs it; it is the sentence
under test, not the sandbox), and the sentence worked out from its stderr
must fit its case: the right line, the right name or suggestion, and no
wrong advice."""
import os
import re
import subprocess
import tempfile
import tomllib

import pytest

from server.runs.explain import explain

with open(os.path.join(os.path.dirname(__file__), "explain_corpus.toml"), "rb") as f:
    CASES = tomllib.load(f)["case"]


def stderr_of(case):
    with tempfile.TemporaryDirectory() as folder:
        for name, text in {"main.py": case["program"], **case.get("files", {})}.items():
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        done = subprocess.run(["/usr/bin/python3", "-E", "-s", "main.py"], input=case.get("stdin", ""),
                              capture_output=True, text=True, cwd=folder, timeout=60)
        return done.stderr.replace(folder, "/home/student")


def test_the_corpus_is_large_and_each_case_complete():
    assert len(CASES) >= 100
    for case in CASES:
        assert {"program", "error", "says"} <= case.keys() <= {"program", "error", "says", "not_says", "stdin",
                                                              "files"}, case


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['error']}" for i, c in enumerate(CASES)])
def test_each_mistake_gets_a_sentence_that_fits_it(case):
    stderr = stderr_of(case)
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(case["error"] + ":") or last == case["error"], stderr  # the case is what it says
    sentence = explain(stderr)
    for words in case["says"]:
        assert words in sentence, (stderr, sentence)
    for words in case.get("not_says", []):
        assert words not in sentence, (stderr, sentence)
    called = re.search(r"NameError: name '(\w+)'", last)
    if called and re.search(rf"(?<![\w.]){called.group(1)}\s*\(", stderr):
        assert "quotes" not in sentence, sentence  # a called name is a function, never text
    assert sentence.endswith((".", "?")) and "\n" not in sentence and len(sentence) < 400, sentence
