"""The exercise format (issue 23): exercise.toml read into an Exercise with
every problem a sentence naming the file and what to change; the writer's
text read back gives the same exercise; tests.py's unnamed test functions
become checks (read with ast, never imported)."""
import pathlib
from datetime import datetime, timedelta, timezone

from hypothesis import given, settings, strategies as st

from server.exercises import model
from server.exercises.model import Check, Exercise

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "exercises" / "average"


def problems_of(toml, tests=None):
    return model.parse(toml, tests)[1]


HEAD = 'title = "Average"\nfile = "average.py"\n'


def test_the_example_exercise_reads_without_problems():
    exercise, problems = model.parse((EXAMPLE / "exercise.toml").read_text(), (EXAMPLE / "tests.py").read_text())
    assert problems == []
    assert exercise.title == "Average" and exercise.file == "average.py"
    kinds = [(c.kind, c.declared) for c in exercise.checks]
    assert kinds.count(("output", True)) == 2 and kinds.count(("code", True)) == 1
    # test_one_number is named by no check: a visible function check worth 1 point.
    assert exercise.check("test_one_number") == Check(id="test_one_number", kind="function", test="test_one_number",
                                                      declared=False)
    assert exercise.max_score == 8


def test_every_problem_is_a_sentence_naming_the_file_and_what_to_change():
    cases = {
        'title = "x': "exercise.toml: ",
        'file = "a.py"\n': "exercise.toml: 'title' is missing.",
        'title = "A"\n': "exercise.toml: 'file' is missing",
        HEAD + 'titel = "x"\n': "exercise.toml: 'titel' is not a setting here. Did you mean 'title'?",
        HEAD + "due = 2025-03-01\n": "exercise.toml: 'due' needs a time of day and a time zone",
        HEAD + "due = 2025-03-01T09:00:00\n": "exercise.toml: 'due' needs a time zone",
        HEAD + 'due = "soon"\n': "exercise.toml: 'due' must be a date and time",
        'title = "A"\nfile = "../x.py"\n': "exercise.toml: 'file': ",
        'title = "A"\nfile = "notes.txt"\n': "exercise.toml: 'file' must be a Python file",
        'title = "A"\nfile = "my-file.py"\n': "exercise.toml: 'file' must be a Python file whose name can be imported",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = "1"\npoints = 1.5\n':
            "exercise.toml, check 1: 'points' must be a whole number",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = "1"\n[[check]]\nid = "b"\nkind = "output"\n'
               'expected = "2"\npoints = -1\n': "exercise.toml, check 2: 'points' must be a whole number",
        HEAD + '[[check]]\nid = "a"\nkind = "shell"\n': "exercise.toml, check 1: 'kind' must be one of output",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\n': "exercise.toml, check 1: 'expected' is missing.",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpect = "1"\n':
            "exercise.toml, check 1: 'expect' is not a setting here. Did you mean 'expected'?",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = "("\ncompare = "regex"\n':
            "exercise.toml, check 1: 'expected' is not a valid pattern",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = "1"\ncompare = "fuzzy"\n':
            "exercise.toml, check 1: 'compare' must be one of output, exact, normalized, regex.",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = "1"\nvisibility = "secret"\n':
            "exercise.toml, check 1: 'visibility' must be one of visible, hidden, after_due.",
        HEAD + '[[check]]\nid = "a b"\nkind = "code"\nrule = "uses_loop"\n': "exercise.toml, check 1: 'id' must be",
        HEAD + '[[check]]\nid = "a"\nkind = "code"\nrule = "defines:1x"\n': "exercise.toml, check 1: 'rule' must be",
        HEAD + '[[check]]\nid = "a"\nkind = "function"\ntest = "helper"\n':
            "exercise.toml, check 1: 'test' must be the name of a function of tests.py",
        HEAD + '[[check]]\nid = "a"\nkind = "code"\nrule = "uses_loop"\n[[check]]\nid = "a"\nkind = "code"\n'
               'rule = "uses_loop"\n': "exercise.toml: two checks have the id 'a'",
        HEAD + 'check = 3\n': "exercise.toml: write each check as a [[check]] table.",
        HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = 5\n': "exercise.toml, check 1: 'expected' must be text",
    }
    for toml, wanted in cases.items():
        found = problems_of(toml)
        assert found and found[0].startswith(wanted), (toml, found)


def test_tests_py_is_read_not_run():
    tests = "import os\nos.system('touch /tmp/pwned')\ndef test_a():\n    pass\ndef helper():\n    pass\n" \
            "class TestX:\n    def test_m(self): pass\nasync def test_async(): pass\n"
    exercise, problems = model.parse(HEAD, tests)
    assert problems == [] and [c.id for c in exercise.checks] == ["test_a"]
    assert not pathlib.Path("/tmp/pwned").exists()
    # A check naming a test tests.py lacks; tests.py that is not Python; an unnamed test with a taken id.
    assert problems_of(HEAD + '[[check]]\nid = "f"\nkind = "function"\ntest = "test_b"\n', tests) == [
        "exercise.toml, check 'f': tests.py has no function test_b(). Add it to tests.py or correct the name."]
    assert problems_of(HEAD, "def test_a(:\n")[0].startswith("tests.py, line 1: ")
    [problem] = problems_of(HEAD + '[[check]]\nid = "test_a"\nkind = "code"\nrule = "uses_loop"\n', tests)
    assert problem.startswith("exercise.toml: two checks have the id 'test_a' (the function test_a() of tests.py")


# -- the writer: parse(render(e)) == e -----------------------------------------------

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,20}\Z")
names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,10}\Z")
common = dict(points=st.integers(0, model.MAX_POINTS), visibility=st.sampled_from(model.VISIBILITIES), hint=text)
checks = st.one_of(
    st.builds(Check, id=ids, kind=st.just("output"), input=text, expected=text,
              compare=st.sampled_from(("output", "exact", "normalized")), **common),
    st.builds(Check, id=ids, kind=st.just("function"), test=names.map(lambda n: "test_" + n), **common),
    st.builds(Check, id=ids, kind=st.just("code"), **common,
              rule=st.one_of(st.just("uses_loop"), st.tuples(st.sampled_from(("defines", "uses_call", "no_import")),
                                                             names).map(":".join))),
)
dues = st.one_of(st.none(), st.builds(
    lambda when, minutes: when.replace(tzinfo=timezone(timedelta(minutes=minutes))),
    st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 1, 1)), st.integers(-23 * 60, 23 * 60)))
exercises = st.builds(
    Exercise, title=text.filter(str.strip), due=dues,
    file=st.tuples(st.lists(names, max_size=2), names).map(lambda t: "/".join(t[0] + [t[1] + ".py"])),
    checks=st.lists(checks, max_size=5, unique_by=lambda c: c.id).map(tuple))


@settings(max_examples=200, deadline=None)
@given(exercises)
def test_what_the_writer_writes_reads_back_the_same(exercise):
    tests = "".join(f"def {c.test}():\n    pass\n" for c in exercise.checks if c.kind == "function")
    again, problems = model.parse(model.render(exercise), tests)
    assert problems == [] and again == exercise
    assert again.due is None or again.due.utcoffset() == exercise.due.utcoffset()


def test_an_output_check_leaves_prompts_out_unless_it_says_exact():
    output = HEAD + '[[check]]\nid = "a"\nkind = "output"\nexpected = "1"\n'
    exercise, problems = model.parse(output)
    assert problems == [] and exercise.checks[0].compare == "output"
    assert "compare" not in model.render(exercise)  # the default is left out, and so means the same when read back
    exact, problems = model.parse(output + 'compare = "exact"\n')
    assert problems == [] and exact.checks[0].compare == "exact"
    assert 'compare = "exact"' in model.render(exact) and model.parse(model.render(exact))[0] == exact


def test_the_teachers_guides_example_reads_without_problems():
    guide = (EXAMPLE.parent.parent.parent / "docs" / "teachers.md").read_text()
    toml = guide.split("```toml\n", 1)[1].split("```", 1)[0]
    exercise, problems = model.parse(toml, (EXAMPLE / "tests.py").read_text())
    assert problems == [] and exercise.title == "Average"
