"""The exercise format's smaller rules (server/exercises/model.py), each on
its own: code check rules, folder names, due dates, the student's file,
the bounds of a check, tests.py's functions as checks. The format as a
whole is tests/test_exercise_format.py."""
from datetime import date, datetime, timedelta, timezone

import pytest

from server.errors import Refused
from server.exercises import model

HEAD = 'title = "Average"\nfile = "average.py"\n'


def output_check(**more):
    table = {"id": "a", "kind": "output", "expected": "5\n", **more}
    return {"title": "Average", "file": "average.py", "check": [table]}


@pytest.mark.parametrize("rule", ["uses_loop", "defines:average", "defines:_helper", "uses_call:print",
                                  "no_import:random", "no_import:os.path", "no_import:_thread"])
def test_a_rule_the_checker_knows_is_taken(rule):
    assert model.rule_problem(rule) is None


@pytest.mark.parametrize("rule", ["uses_loops", "defines:", "defines:1x", "defines:a b", "uses_call:print()",
                                  "no_import:", "no_import:os..path", "no_import:.os", "no_import:os.", "imports:os",
                                  "uses_loop:x", "defines:average\n"])
def test_a_rule_it_does_not_know_says_which_rules_there_are(rule):
    assert model.rule_problem(rule).startswith("'rule' must be uses_loop, defines:NAME, no_import:MODULE")


@pytest.mark.parametrize("slug", ["average", "week-2", "a", "0", "x_y", "a" * 64])
def test_a_folder_name_of_the_url_is_taken(slug):
    assert model.valid_slug(slug) == slug


@pytest.mark.parametrize("slug", ["", "Average", "-dash", "_under", "a b", "a/b", "..", "average\n", "a" * 65,
                                  "é", None])
def test_a_folder_name_that_is_not_one_is_refused_before_anything_is_looked_up(slug):
    with pytest.raises(Refused) as refused:
        model.valid_slug(slug)
    assert refused.value.status == 400 and refused.value.code == "bad_slug"
    assert "1 to 64 lowercase letters, digits, '-' or '_'" in refused.value.message


@pytest.mark.parametrize("value, problem", [
    ("2025-03-01T09:00:00+01:00", None),
    (datetime(2025, 3, 1, 9, tzinfo=timezone.utc), None),
    ("2025-03-01T09:00:00Z", None),
    (None, None),
    ("soon", "must be a date and time"),
    ("2025-03-01T09:00:00", "needs a time zone"),
    (date(2025, 3, 1), "needs a time of day and a time zone"),
    (20250301, "needs a date and time and a time zone"),
    (datetime(2025, 3, 1, 9, tzinfo=timezone(timedelta(seconds=3630))), "the time zone must be whole minutes"),
])
def test_a_due_date_needs_a_time_and_a_whole_minute_time_zone(value, problem):
    problems = []
    due = model.due_of(value, problems)
    if problem is None:
        assert problems == [] and (due is None) == (value is None)
        if due is not None:
            assert due.utcoffset() is not None
    else:
        assert due is None and len(problems) == 1 and problem in problems[0]
        assert problems[0].startswith("exercise.toml: 'due'")


@pytest.mark.parametrize("file, kept", [("average.py", "average.py"), ("week2/average.py", "week2/average.py"),
                                        ("_private.py", "_private.py")])
def test_the_students_file_is_a_python_file_in_their_folder(file, kept):
    exercise, problems = model.from_data({"title": "A", "file": file})
    assert problems == [] and exercise.file == kept


@pytest.mark.parametrize("file, problem", [
    (None, "'file' is missing: name the student's Python file"),
    (3, "'file' must be text in quotes"),
    ("", "'file': name a file or folder."),
    ("/abs/average.py", "'file': use a path relative to your folder"),
    ("a/../b.py", "'file': '..' is not a file or folder name."),
    ("1st.py", "'file' must be a Python file whose name can be imported"),
    ("average.PY", "'file' must be a Python file"),
    (".py", "'file' must be a Python file"),
])
def test_a_students_file_that_cannot_be_run_or_imported_is_a_sentence(file, problem):
    _, problems = model.from_data({"title": "A", "file": file})
    assert problems == [f"exercise.toml: {problem}"] or problems[0].startswith(f"exercise.toml: {problem}")


@pytest.mark.parametrize("more, problem", [
    ({"points": 0}, None), ({"points": model.MAX_POINTS}, None),
    ({"points": model.MAX_POINTS + 1}, "'points' must be a whole number from 0 to 1000."),
    ({"points": True}, "'points' must be a whole number"),
    ({"hint": "h" * model.MAX_HINT}, None),
    ({"hint": "h" * (model.MAX_HINT + 1)}, "'hint' is longer than 1000 characters."),
    ({"expected": "x" * (model.MAX_TEXT + 1)}, "'expected' is longer than"),
    ({"input": 4}, "'input' must be text in quotes."),
    ({"compare": "regex", "expected": r"\d+"}, None),
    ({"compare": "regex", "expected": "[a-"}, "'expected' is not a valid pattern"),
    ({"test": "test_x"}, "'test' is not a setting here."),
    ({"id": "two numbers"}, "'id' must be a short name"),
    ({"id": "-a"}, "'id' must be a short name"),
    ({"id": "a" * 65}, "'id' must be a short name"),
    ({"id": "v1.2_b-c"}, None),
])
def test_the_bounds_of_an_output_check(more, problem):
    exercise, problems = model.from_data(output_check(**more))
    if problem is None:
        assert problems == [] and len(exercise.checks) == 1
    else:
        assert any(p.startswith("exercise.toml, check 1: ") and problem in p for p in problems), problems
        assert exercise.checks == ()


def test_more_checks_than_allowed_is_one_problem_and_the_first_are_kept():
    tables = [{"id": f"c{i}", "kind": "code", "rule": "uses_loop"} for i in range(model.MAX_CHECKS + 3)]
    exercise, problems = model.from_data({"title": "A", "file": "a.py", "check": tables})
    assert problems == [f"exercise.toml: an exercise may have at most {model.MAX_CHECKS} checks."]
    assert len(exercise.checks) == model.MAX_CHECKS


def test_a_title_of_spaces_or_too_long_is_a_problem():
    assert model.from_data({"title": "  ", "file": "a.py"})[1] == ["exercise.toml: 'title' must not be empty."]
    assert model.from_data({"title": "t" * 201, "file": "a.py"})[1][0] == \
        "exercise.toml: 'title' is longer than 200 characters."


def test_tests_py_functions_no_check_names_become_visible_checks_of_one_point():
    tests = ("import math\n\ndef test_one():\n    pass\n\ndef helper():\n    pass\n\nasync def test_async():\n"
             "    pass\n\nclass TestX:\n    def test_inside(self):\n        pass\n\ndef test_two():\n"
             "    def test_nested():\n        pass\n")
    toml = HEAD + '[[check]]\nid = "first"\nkind = "function"\ntest = "test_one"\npoints = 3\n'
    exercise, problems = model.parse(toml, tests)
    assert problems == []
    assert [(c.id, c.test, c.points, c.visibility, c.declared) for c in exercise.checks] == \
        [("first", "test_one", 3, "visible", True), ("test_two", "test_two", 1, "visible", False)]
    assert exercise.max_score == 4 and exercise.declared == exercise.checks[:1]
    assert exercise.check("test_two").kind == "function" and exercise.check("nothing") is None


def test_a_check_naming_a_function_tests_py_lacks_says_to_add_it():
    toml = HEAD + '[[check]]\nid = "f"\nkind = "function"\ntest = "test_missing"\n'
    assert model.parse(toml, "def test_other():\n    pass\n")[1] == [
        "exercise.toml, check 'f': tests.py has no function test_missing(). Add it to tests.py or correct the name."]


def test_an_unnamed_function_with_a_declared_checks_id_is_a_clash_that_says_why():
    toml = HEAD + '[[check]]\nid = "test_b"\nkind = "code"\nrule = "uses_loop"\n'
    problems = model.parse(toml, "def test_b():\n    pass\n")[1]
    assert problems == ["exercise.toml: two checks have the id 'test_b' (the function test_b() of tests.py, which "
                        "no check names, is a check of its own). Give each check its own id."]


def test_tests_py_that_is_not_python_names_its_line():
    problems = []
    assert model.test_functions("def test_a(:\n    pass\n", problems) is None
    assert problems[0].startswith("tests.py, line 1: ") and problems[0].endswith("so that the function checks can run.")
    problems = []
    assert model.test_functions("x = (" * 300 + ")" * 300, problems) is None
    assert problems and problems[0].startswith("tests.py")


def test_a_check_table_is_written_with_only_what_differs_from_the_defaults():
    check = model.Check(id="a", kind="output", expected="5\n", points=2, input="")
    assert model.as_table(check) == {"id": "a", "kind": "output", "expected": "5\n", "points": 2}
    assert model.as_table(check, defaults=True) == {"id": "a", "kind": "output", "input": "", "expected": "5\n",
                                                    "compare": "output", "points": 2, "visibility": "visible",
                                                    "hint": ""}
