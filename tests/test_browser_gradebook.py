"""The gradebook of a class of 60 on a school laptop (1366x768): compact
rows (at least 30 in view), the header kept in view while scrolling,
sorted by name, score or last attempt, filtered to those who have not
attempted or not passed an exercise; every control reachable by keyboard."""
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest

from server.accounts.passwords import hash_password
from tests.browser import LIMITS, assert_accessible, expect, login, shot
from tests.helpers import create_user, sql
from tests.live_support import a_class, user_of
from tests.test_exercises import grader

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

EXERCISE = {"title": "Average", "file": "average.py", "due": None, "instructions": "# Average\n", "tests": "",
            "starter": {"average.py": "print(0)\n"},
            "checks": [{"id": "two", "kind": "output", "input": "", "expected": "0\n", "points": 2},
                       {"id": "loop", "kind": "code", "rule": "uses_loop", "points": 2}]}
STUDENTS = 60
# (student number, score of 4, minutes ago): 10 attempted, 3 of them with full marks.
ATTEMPTS = [(n, [0, 2, 4][i % 3], 50 - i) for i, n in enumerate(range(0, 30, 3))]


@pytest.fixture
def class_of_60(start_server):
    server = start_server(**LIMITS)
    dsn = server.env["DATABASE_URL"]
    create_user(dsn, "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    unused = hash_password("never-signs-in")  # students are rows here: nobody signs in as them
    names = [f"s{n:02d}" for n in range(STUDENTS)]
    for name in names:
        sql(dsn, "INSERT INTO users (username, display_name, role, password_hash) VALUES (%s, %s, 'student', %s)",
            name, f"Student {name[1:]}", unused)
    number = a_class(server, "grace", *names, name="8A Python")
    teacher = server.client()
    teacher.login_ok("grace", "grace-password")
    r = teacher.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE)
    assert r.status_code == 200, r.text

    def attempt(n, score, minutes):
        user = user_of(server, names[n])
        results = [{"id": "two", "passed": score >= 2, "message": ""}, {"id": "loop", "passed": score >= 4, "message": ""}]
        started = datetime.now(timezone.utc) - timedelta(minutes=minutes)
        return lambda exercises: exercises.record_attempt(user, number, "average", started, results)
    with ThreadPoolExecutor(1) as thread:  # asyncio.run, beside Playwright's own event loop
        thread.submit(grader, server, *(attempt(*a) for a in ATTEMPTS)).result()
    return server, number


def shown_usernames(book):
    return book.locator("table.gradebook tbody tr").evaluate_all("rows => rows.map((r) => r.dataset.username)")


def test_a_class_of_60_fits_sorts_and_filters(class_of_60, new_page):
    server, number = class_of_60
    page = new_page(server)
    login(page, "grace", "grace-password", lands_on="/teacher")
    page.locator("#class-panel").get_by_role("button", name="Gradebook").click()
    book = page.get_by_role("dialog", name="Gradebook: 8A Python")
    expect(book.locator("table.gradebook tbody tr")).to_have_count(STUDENTS)
    expect(book.locator(".grid-count")).to_have_text(f"{STUDENTS} of {STUDENTS} students shown.")

    # At least 30 rows in view at once, on the laptop's screen.
    wrap = book.locator(".grid-wrap")
    in_view = wrap.evaluate("""(wrap) => {
        const box = wrap.getBoundingClientRect();
        return [...wrap.querySelectorAll("tbody tr")].filter((r) => {
            const b = r.getBoundingClientRect();
            return b.top >= box.top && b.bottom <= Math.min(box.bottom, window.innerHeight);
        }).length;
    }""")
    shot(page, "63-gradebook-60")
    assert in_view >= 30, in_view
    assert_accessible(page, "the gradebook of 60 students")
    # Scrolled to the end, the header is still there, on top of the rows.
    wrap.evaluate("(wrap) => { wrap.scrollTop = wrap.scrollHeight; }")
    header, box = book.locator("table.gradebook thead th").first.bounding_box(), wrap.bounding_box()
    assert abs(header["y"] - box["y"]) < 2, (header, box)

    # Sorted by score, lowest first: those not started, then 0/4, 2/4, 4/4.
    book.get_by_label("Sort by").select_option(label="Score, lowest first")
    order = shown_usernames(book)
    scores = {f"s{n:02d}": score for n, score, _ in ATTEMPTS}
    ranked = [scores.get(u, -1) for u in order]
    assert ranked == sorted(ranked), ranked
    # By last attempt, newest first: the newest attempt (the fewest minutes ago) leads.
    book.get_by_label("Sort by").select_option(label="Last attempt, newest first")
    newest = min(ATTEMPTS, key=lambda a: a[2])
    assert shown_usernames(book)[0] == f"s{newest[0]:02d}"

    # Filters: who has not attempted it, who has not passed it (all of its points).
    book.get_by_label("Show").select_option(label="Not attempted")
    expect(book.locator("table.gradebook tbody tr")).to_have_count(STUDENTS - len(ATTEMPTS))
    expect(book.locator(".grid-count")).to_have_text(f"{STUDENTS - len(ATTEMPTS)} of {STUDENTS} students shown.")
    book.get_by_label("Show").select_option(label="Not passed")
    passed = [a for a in ATTEMPTS if a[1] == 4]
    expect(book.locator("table.gradebook tbody tr")).to_have_count(STUDENTS - len(passed))
    assert not set(shown_usernames(book)) & {f"s{n:02d}" for n, _, _ in passed}

    # By name again, with the keyboard alone: Tab reaches the controls, arrows choose.
    book.get_by_label("Sort by").focus()
    page.keyboard.press("Home")
    expect(book.get_by_label("Sort by")).to_have_value("name")
    assert shown_usernames(book)[:3] == ["s00", "s01", "s02"]
    # A cell says everything it stands for in its name.
    book.get_by_label("Show").select_option(label="Everyone")
    cell = book.locator('tr[data-username="s00"] td[data-slug="average"] button')
    expect(cell).to_have_attribute("aria-label", "Student 00, Average: best 0/4 · 1× · stuck; best 0/4, latest 0/4, 1 attempt, "
                                                 f"last checked {cell.get_attribute('title').split('last checked ')[1]}. "
                                                 "Open the latest attempt.")
    assert page.errors == []
