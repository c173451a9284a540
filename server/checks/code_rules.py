"""A check's code rules that hold while the student's program runs, not only
on its text.

Only a prohibition can be watched as the program runs: the modules that
the exercise's `no_import:MODULE` rules name go with every run of the
student's program in an attempt (RunSpec.forbid), and the launcher ends the
program with an exit code of its own if it imports one, however the import
is spelled (runs/child/import_guard.py). The text rule (testing.py) still
gives the early, friendly message with its line; when the text passed but a
run says otherwise, the run wins. The other rules (uses_loop, defines,
uses_call) read the text only.
"""
from typing import Any, Iterable

from ..exercises.model import Check
from ..runs.child import import_guard


def _rule(check: Check) -> tuple[str, str]:
    kind, _, name = check.rule.partition(":") if check.kind == "code" else ("", "", "")
    return kind, name


def forbidden(checks: Iterable[Check]) -> tuple[str, ...]:
    """The modules the no_import rules of `checks` name, each once, in order
    (a module's place is its exit code's: import_guard.exit_code)."""
    names: list[str] = []
    for check in checks:
        kind, name = _rule(check)
        if kind == "no_import" and name and name not in names:
            names.append(name)
    return tuple(names)


def broken_while_running(checks: Iterable[Check], forbid: tuple[str, ...],
                         exits: list[dict[str, Any] | None]) -> dict[str, dict[str, Any]]:
    """{check id: the checker's kind of verdict} for each no_import rule that
    a run's exit (`exits`: the runs' exit messages, or None) says was
    broken; a program's own exit code that looks like the guard's only
    fails itself."""
    codes = {e.get("code") for e in exits if isinstance(e, dict) and e.get("type") == "exit"}
    said: dict[str, str] = {}
    for index, name in enumerate(forbid):
        if import_guard.exit_code(index) in codes:
            said[name] = (f"Your program imported {name} while it ran (itself, or through a module it imported), "
                          "which this exercise does not allow.")
        elif import_guard.EXIT_HIDDEN in codes:
            said[name] = (f"Your program started another program or reached into Python's internals while it "
                          f"ran, so the check cannot tell whether it imported {name}. This exercise does not "
                          "allow that.")
    verdicts: dict[str, dict[str, Any]] = {}
    for check in checks:
        kind, name = _rule(check)
        if kind == "no_import" and name in said:
            verdicts[check.id] = {"type": "result", "id": check.id, "passed": False, "message": said[name],
                                  "line": None, "seen": "while the program ran"}
    return verdicts
