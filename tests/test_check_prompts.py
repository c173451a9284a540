"""Output checks and input() prompts: by default the text input() prints as
its prompt is not compared, "exact" compares it; the student sees the run
with its prompts and typed lines apart. The whole path, from the bytes a
program writes in a sandbox (the launcher's marks around each prompt) to
the verdict of testing.py: the marks cut out (protocol.py), the prompt
told by the run (run.py), the transcript kept (checks/transcript.py),
compared in the checker's code. A program that prints the marks itself
gains nothing it could not have had by printing less.

The sandbox tests need root, as tests/test_sandboxes.py does.
"""
import asyncio

import pytest

from server.checks.grader import Collected
from server.checks.transcript import Transcript
from server.runs.child import testing
from server.runs.run import Run
from tests.test_check_channel import closed, spec_of, started
from tests.test_sandboxes import home, sandbox, write  # noqa: F401 (home, sandbox: fixtures; they need root)

TIMEOUT = 60
PROMPT, INPUT = "\x1b]7011;prompt\x07", "\x1b]7011;input\x07"


def verdict(pieces, expected, compare):
    return testing.check_output({"id": "c", "compare": compare, "expected": expected, "transcript": pieces})


# -- the marks, the transcript and the comparison, in this process ---------------------

def test_a_transcript_tells_prompts_output_and_typed_lines_apart():
    t = Transcript(1000)
    for message in ({"type": "output", "stream": "stdout", "data": "Hi\r\nA num"},
                    {"type": "output", "stream": "stdout", "data": "ber: "}, {"type": "input", "prompt": "A number: "},
                    {"type": "input"},  # input() with no prompt
                    {"type": "output", "stream": "stdout", "data": "Sum: 7\r\nNames\r\n> "},
                    {"type": "input", "prompt": "Names\r\n> "},
                    {"type": "input", "prompt": "not printed"}):  # a prompt that is not the output's end: none
        c = Collected(transcript=t)
        asyncio.run(c.send(message))
    assert t.pieces("3\n4\n") == [["output", "Hi\n"], ["prompt", "A number: "], ["typed", "3\n4\n"],
                                  ["output", "Sum: 7\n"], ["prompt", "Names\n> "]]
    assert t.text() == "Hi\nA number: Sum: 7\nNames\n> "


def test_prompts_are_left_out_by_default_and_compared_under_exact():
    pieces = [["prompt", "First: "], ["typed", "3\n"], ["prompt", "Second\n(a number): "], ["typed", "4\n"],
              ["output", "Sum: 7\n"]]
    for compare in ("output", "normalized", "regex"):
        assert verdict(pieces, "Sum: 7\n" if compare != "regex" else r"Sum: \d+", compare)["passed"], compare
    got = verdict(pieces, "Sum: 7\n", "exact")
    assert not got["passed"] and "-Sum: 7\n+First: Second\n+(a number): Sum: 7" in got["diff"]
    assert "what input() shows before you type too" in got["message"]
    # Under exact the prompts were compared: the transcript shows them as output.
    assert got["transcript"] == [["output", "First: "], ["typed", "3\n"], ["output", "Second\n(a number): "],
                                 ["typed", "4\n"], ["output", "Sum: 7\n"]]
    assert verdict(pieces, "First: Second\n(a number): Sum: 7", "exact")["passed"]
    wrong = verdict(pieces, "Sum: 8\n", "output")
    assert not wrong["passed"] and wrong["diff"].endswith("-Sum: 8\n+Sum: 7")
    assert wrong["transcript"] == pieces and "is left out" in wrong["message"]
    # A checker given only the text (no transcript) compares it all, as before.
    assert testing.check_output({"id": "c", "compare": "output", "expected": "Hi", "actual": "Hi\r\n"})["passed"]


# -- the whole path, in a real sandbox ---------------------------------------------------

PROMPTING = """
a = int(input("First number: "))
b = int(input("Second\\nnumber: "))
name = input()
print("Sum:", a + b)
print("Bye", name, end="")
"""

FORGER = """
import sys
print("Sum: 7")
sys.stdout.write("\\x1b]7011;prompt\\x07hidden from the comparison\\n\\x1b]7011;input\\x07")
sys.stdout.write("\\x1b]7011;input\\x07\\x1b]7011;prompt\\x07never ended\\n")
"""


async def collected(kind, home, source, typed):
    """Run `source` in a fresh sandbox of `kind` as a check runs it (echo
    off, `typed` given at once): its Collected sink."""
    write(home, "prog.py", source)
    prepared = await started(kind, home, runs=1)
    try:
        sink = Collected()
        run = Run(spec_of(kind.cfg, "prog.py", echo=False, stdin=typed), prepared, sink.send)
        exit_ = await asyncio.wait_for(run.go(), TIMEOUT)
        assert exit_["reason"] == "ok", exit_
        return sink
    finally:
        await closed(prepared)


@pytest.fixture
def real(sandbox, home):
    """collect(source, typed) -> the Collected sink of a check's run of it."""
    kind = sandbox()
    return lambda source, typed: asyncio.run(collected(kind, home, source, typed))


def test_a_prompting_program_passes_by_default_and_fails_under_exact(real):
    sink = real(PROMPTING, "3\n4\nAnn\n")
    pieces = sink.transcript.pieces("3\n4\nAnn\n")
    assert pieces == [["prompt", "First number: "], ["typed", "3\n"], ["prompt", "Second\nnumber: "],
                      ["typed", "4\nAnn\n"], ["output", "Sum: 7\nBye Ann"]]
    assert verdict(pieces, "Sum: 7\nBye Ann\n", "output")["passed"]
    assert verdict(pieces, "sum:  7\nbye ann", "normalized")["passed"]
    assert not verdict(pieces, "Sum: 7\nBye Ann\n", "exact")["passed"]
    assert verdict(pieces, "First number: Second\nnumber: Sum: 7\nBye Ann", "exact")["passed"]


def test_a_program_that_prints_the_marks_itself_only_hides_its_own_output(real):
    sink = real(FORGER, "secret\n")
    pieces = sink.transcript.pieces("secret\n")
    # Its forged prompt is left out (as if not printed); the unended one is output; the terminal never shows a mark.
    assert pieces == [["output", "Sum: 7\n"], ["prompt", "hidden from the comparison\n"], ["typed", "secret\n"],
                      ["output", "never ended\n"]]
    assert "\x1b" not in sink.text
    assert verdict(pieces, "Sum: 7\nnever ended\n", "output")["passed"]
    assert not verdict(pieces, "Sum: 7\n", "output")["passed"]
    assert verdict(pieces, "Sum: 7\nhidden from the comparison\nnever ended", "exact")["passed"]
