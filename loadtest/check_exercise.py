"""The exercise bench_checks grades, written once and given to both
graders: PyClassroom's (an exercise form: exercise.toml's checks and a
tests.py) and Otter-Grader's (OK-format test files). Standard library only.

Ten checks: five output checks (the program is run with numbers on its
input and must print their average) and five function checks (tests.py,
pytest style: plain asserts calling `average`). The wrong solution adds up
the numbers' absolute values, so it fails exactly the checks with a
negative number in them, whose points it loses: WRONG_SCORE of MAX_SCORE.

The program reads its input from sys.stdin rather than input(): Otter runs
a .py submission's whole text in a Jupyter kernel, `if __name__ ==
"__main__":` block included, where input() raises StdinNotImplementedError
and stops the grading, while sys.stdin reads as empty there. PyClassroom
runs it either way; the submissions are the very same text for both.
"""
import pprint

SLUG = "average"
FILE = "average.py"

# (id, kind, what, points, visibility, whether the wrong solution passes it)
# what: (input, expected output) of an output check; the assert of a function check.
CHECKS = [
    ("two-numbers-printed", "output", ("4\n6\n\n", "Average: 5.0\n"), 1, "visible", True),
    ("four-numbers-printed", "output", ("1\n2\n3\n4\n\n", "Average: 2.5\n"), 1, "visible", True),
    ("negatives-printed", "output", ("-2\n-4\n\n", "Average: -3.0\n"), 2, "visible", False),
    ("mixed-printed", "output", ("10\n-10\n6\n\n", "Average: 2.0\n"), 1, "hidden", False),
    ("no-numbers-printed", "output", ("\n", "No numbers.\n"), 1, "hidden", True),
    ("two-numbers", "function", "average([4, 6]) == 5", 1, "visible", True),
    ("one-number", "function", "average([7]) == 7", 1, "visible", True),
    ("negative-numbers", "function", "average([-2, -4, 0]) == -2", 2, "visible", False),
    ("mixed-numbers", "function", "average([-1, 1]) == 0", 1, "hidden", False),
    ("halves", "function", "abs(average([1, 2]) - 1.5) < 1e-9", 1, "hidden", True),
]
MAX_SCORE = sum(c[3] for c in CHECKS)
WRONG_SCORE = sum(c[3] for c in CHECKS if c[5])
WRONG_PASSED = sum(1 for c in CHECKS if c[5])

RIGHT = '''import sys


def average(numbers):
    """The average of a list of numbers."""
    total = 0
    for n in numbers:
        total += n
    return total / len(numbers)


def read_numbers():
    """Whole numbers, one per line, until an empty line (or the end)."""
    numbers = []
    for line in sys.stdin:
        if not line.strip():
            break
        numbers.append(int(line))
    return numbers


if __name__ == "__main__":
    numbers = read_numbers()
    if numbers:
        print("Average:", average(numbers))
    else:
        print("No numbers.")
'''
WRONG = RIGHT.replace("total += n", "total += abs(n)")
assert WRONG != RIGHT


def submission(index):
    """(source, right?) of student `index`: every other one is right, so that
    the right and the wrong ones are interleaved in the order of the clicks."""
    right = index % 2 == 0
    return (RIGHT if right else WRONG), right


def expected(right):
    """(score, checks passed) a submission must get."""
    return (MAX_SCORE, len(CHECKS)) if right else (WRONG_SCORE, WRONG_PASSED)


def _test_name(check_id):
    return "test_" + check_id.replace("-", "_")


# -- PyClassroom -------------------------------------------------------------------------

def tests_py():
    lines = ['"""Function checks of the bench exercise: plain asserts on average()."""',
             f"from {FILE.removesuffix('.py')} import average", ""]
    for check_id, kind, what, *_ in CHECKS:
        if kind == "function":
            lines += ["", f"def {_test_name(check_id)}():", f"    assert {what}", ""]
    return "\n".join(lines)


def pyclassroom_form():
    """The exercise as the teacher's browser PUTs it to
    /api/classes/<id>/exercises/<slug>."""
    checks = []
    for check_id, kind, what, points, visibility, _ in CHECKS:
        check = {"id": check_id, "kind": kind, "points": points, "visibility": visibility}
        if kind == "output":
            check.update(input=what[0], expected=what[1], compare="normalized")
        else:
            check["test"] = _test_name(check_id)
        checks.append(check)
    return {"title": "Average (benchmark)", "file": FILE, "due": None,
            "instructions": "# Average\n\nRead whole numbers, one per line, until an empty line, and print "
                            "`Average: ` and their average (`No numbers.` when there are none). "
                            "Write `average(numbers)`.\n",
            "tests": tests_py(), "starter": {FILE: "def average(numbers):\n    return 0\n"}, "checks": checks}


# -- Otter-Grader ------------------------------------------------------------------------

OUTPUT_CASE = """>>> import subprocess, sys
>>> ran = subprocess.run([sys.executable, {file!r}], input={input!r}, capture_output=True, text=True, timeout=10)
>>> " ".join(ran.stdout.split()).lower() == {expected!r}
True"""


def otter_tests():
    """{file name: text} of the OK-format test files, one per check, in the
    order of CHECKS (q01..q10): a function check calls average() in the
    kernel where the submission ran; an output check runs the submission
    (a file in the grading folder) with the input through subprocess and
    compares its output as PyClassroom's "normalized" does (whitespace
    and case)."""
    files = {}
    for number, (check_id, kind, what, points, visibility, _) in enumerate(CHECKS, 1):
        if kind == "output":
            code = OUTPUT_CASE.format(file=FILE, input=what[0], expected=" ".join(what[1].split()).lower())
        else:
            code = f">>> {what}\nTrue"
        test = {"name": f"q{number:02d}", "points": points,
                "suites": [{"cases": [{"code": code, "hidden": visibility != "visible", "locked": False}],
                            "scored": True, "setup": "", "teardown": "", "type": "doctest"}]}
        files[f"q{number:02d}.py"] = f"# {check_id}\nOK_FORMAT = True\n\ntest = {pprint.pformat(test, width=110)}\n"
    return files
