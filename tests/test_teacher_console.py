"""The consoles a worker keeps for teachers who follow a student
(server/teaching/consoles.py), in memory only: what a run's messages make
of them, and every bound (text, figures, consoles, the worker's figures).
Writing them to PostgreSQL is tests/test_student_detail.py's."""
import pytest

from server.teaching import consoles
from server.teaching.consoles import Console, Consoles

ADA, ALAN = {"id": 1}, {"id": 2}


def kept(worker=None):
    return worker or Consoles(pool=None, worker="w1")


def text_of(console):
    return [(stream, text) for stream, text in console.segments]


def test_a_run_makes_a_console_of_what_its_ide_showed():
    here = kept()
    for message in ({"type": "started"}, {"type": "output", "stream": "stdout", "data": "Name? "},
                    {"type": "input"}, {"type": "output", "stream": "stdout", "data": "Ada\nHi Ada\n"},
                    {"type": "output", "stream": "stderr", "data": "Traceback...\n"},
                    {"type": "exit", "reason": "exited", "message": "ended with an error", "code": 1, "extra": [1]}):
        here.run_console(ADA, message)
    console = here.kept[1]
    assert text_of(console) == [("stdout", "Name? Ada\nHi Ada\n"), ("stderr", "Traceback...\n")]
    assert not console.running and not console.waiting
    assert console.exit == {"reason": "exited", "message": "ended with an error"}


def test_waiting_for_input_lasts_until_the_next_output():
    here = kept()
    here.run_console(ADA, {"type": "started"})
    here.run_console(ADA, {"type": "input"})
    assert here.kept[1].waiting
    here.run_console(ADA, {"type": "output", "stream": "stdout", "data": "x"})
    assert not here.kept[1].waiting


def test_messages_of_a_run_that_started_elsewhere_or_of_no_kind_kept_are_ignored():
    here = kept()
    here.run_console(ADA, {"type": "output", "stream": "stdout", "data": "lost"})
    assert here.kept == {}
    here.run_console(ADA, {"type": "started"})
    here.run_console(ADA, {"type": "notice", "message": "x"})
    here.run_console(ADA, {"type": "output", "stream": "stdout", "data": 3})
    assert text_of(here.kept[1]) == []


def test_a_new_run_starts_a_new_console():
    here = kept()
    here.run_console(ADA, {"type": "started"})
    here.run_console(ADA, {"type": "output", "stream": "stdout", "data": "first run"})
    here.run_console(ADA, {"type": "started"})
    assert text_of(here.kept[1]) == [] and here.kept[1].running


def test_the_text_keeps_its_tail_from_the_start_of_a_line():
    console = Console()
    line = "x" * 99 + "\n"
    for _ in range(consoles.MAX_TEXT // 100 + 50):
        console.text("stdout", line)
    console.text("stderr", "last\n")
    assert console.cut and console.size <= consoles.MAX_TEXT
    assert console.size == sum(len(text) for _, text in console.segments)
    first = console.segments[0][1]
    assert first.startswith("x" * 99 + "\n")  # whole lines only
    assert console.segments[-1] == ["stderr", "last\n"]


def test_one_line_longer_than_the_bound_keeps_its_tail():
    console = Console()
    console.text("stdout", "y" * consoles.MAX_TEXT + "tail")
    assert console.cut and console.size == consoles.MAX_TEXT
    assert console.segments[0][1].endswith("ytail") and len(console.segments[0][1]) == consoles.MAX_TEXT


def test_the_last_figures_are_kept_within_their_bytes():
    console = Console()
    for n in range(consoles.MAX_FIGURES + 2):
        console.figure(f"png{n}")
    assert list(console.figures) == [f"png{n}" for n in range(2, consoles.MAX_FIGURES + 2)]
    before = console.figures_id
    console.figure("z" * (consoles.MAX_FIGURE_BYTES + 1))  # too large for any console: not kept
    assert console.figures_id == before and len(console.figures) == consoles.MAX_FIGURES
    big = "b" * (consoles.MAX_FIGURE_BYTES // 2 + 1)
    console.figure(big)
    console.figure(big)
    assert list(console.figures) == [big] and console.figure_bytes <= consoles.MAX_FIGURE_BYTES


def test_a_worker_keeps_at_most_its_bound_of_consoles_the_least_recently_touched_going_first(monkeypatch):
    monkeypatch.setattr(consoles, "MAX_CONSOLES", 3)
    here = kept()
    for user_id in (1, 2, 3):
        here.run_console({"id": user_id}, {"type": "started"})
    here.run_console({"id": 1}, {"type": "output", "stream": "stdout", "data": "still here"})
    here.run_console({"id": 4}, {"type": "started"})
    assert list(here.kept) == [3, 1, 4]


def test_the_workers_figures_are_bounded_by_dropping_those_of_the_least_recently_touched(monkeypatch):
    monkeypatch.setattr(consoles, "MAX_WORKER_FIGURE_BYTES", 100)
    here = kept()
    for who in (ADA, ALAN):
        here.run_console(who, {"type": "started"})
    here.run_console(ADA, {"type": "image", "data": "a" * 60})
    here.run_console(ALAN, {"type": "image", "data": "b" * 60})
    assert list(here.kept[1].figures) == [] and list(here.kept[2].figures) == ["b" * 60]
    assert here.figure_bytes == 60
    here.run_console(ALAN, {"type": "started"})  # a new run: its console's figures no longer count
    assert here.figure_bytes == 0


def test_only_a_followed_students_changes_are_marked_to_be_written():
    here = kept()
    here.followed.add(2)
    for who in (ADA, ALAN):
        here.run_console(who, {"type": "started"})
        here.run_console(who, {"type": "output", "stream": "stdout", "data": "x"})
    assert here.dirty == {2} and here.wake.is_set()


@pytest.mark.parametrize("payload, heard", [("42", {42}), ("", set()), ("4 2", set()), ("-1", set()), ("x", set())])
def test_a_follow_announced_names_a_user_id(payload, heard):
    here = kept()
    here._follow_announced(payload)
    assert here.heard == heard
