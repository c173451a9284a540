"""The full-screen class view (issue 24): 60 students of a class on one
screen of a 2-worker server, their real runs' errors grouped, in Chromium;
what a student chose (display name, file name, error message, output) shows
as text in the tiles and the groups, never as markup; who may open it."""
import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

from loadtest.run_client import RunClient
from tests.browser import LIMITS, expect, login, shot, wait_ready
from tests.conftest import PASSWORD, People
from tests.helpers import create_user
from tests.live_support import a_class
from tests.runs_support import save

WAIT = 20_000  # ms: only catches a hang
LESSON = "words = ['a', 'b', 'c']\n\n\nprint(lenght(words))\n"  # NameError at line 4
HOSTILE = '<img src=x onerror="window.pwned=1">'


def tile(page, username):
    return page.locator(f'.tile[data-username="{username}"]')


def fully_visible_tiles(page):
    """How many student tiles are whole inside the window and the tiles' own
    scrolled area (none cut at an edge)."""
    return page.evaluate("""() => {
        const area = document.querySelector('.tiles').getBoundingClientRect();
        const top = Math.max(0, area.top), bottom = Math.min(innerHeight, area.bottom);
        const left = Math.max(0, area.left), right = Math.min(innerWidth, area.right);
        return [...document.querySelectorAll('.tile')].filter((t) => {
            const r = t.getBoundingClientRect();
            return !t.hidden && r.height > 0 && r.top >= top && r.bottom <= bottom
                && r.left >= left && r.right <= right;
        }).length;
    }""")


def run_all(server, runs):
    """Run each (client, path) over the real /ws/run at once; their exit messages."""
    async def one(client, path):
        async with RunClient(server.url, client.http.cookies.get_dict()) as rc:
            return await rc.run(path, timeout=60)

    async def go():
        return await asyncio.gather(*(one(c, p) for c, p in runs))
    with ThreadPoolExecutor(1) as thread:  # Playwright's loop holds this one
        return thread.submit(asyncio.run, go()).result()


def no_markup_ran(page):
    assert page.evaluate("window.pwned") is None
    assert page.locator(".tiles img, .tiles script, .tiles b, .error-groups img, .error-groups script").count() == 0
    assert page.errors == []


def test_sixty_students_on_one_screen_and_the_class_mistakes_grouped(start_server, new_page):
    server = start_server(processes=2, **LIMITS)
    people = People(server)
    runners = [people.student(f"r{i:02d}", display_name=f"Runner {i:02d}") for i in range(10)]
    eve = people.student("eve", display_name=HOSTILE + " Eve")
    forger = people.student("forger", display_name="Forger")
    shouter = people.student("shouter", display_name="Shouter")
    others = [people.student(f"s{i:02d}", display_name=f"Quiet Student {i:02d}", log_in=False) for i in range(47)]
    students = runners + [eve, forger, shouter] + others
    assert len(students) == 60
    create_user(server.env["DATABASE_URL"], "grace", "grace-password", role="teacher", display_name="Grace Hopper")
    number = a_class(server, "grace", *students, name="9C Python")

    teacher = new_page(server)
    login(teacher, "grace", "grace-password", lands_on="/teacher")
    teacher.locator("#class-panel").get_by_role("link", name="Full screen").click()
    teacher.wait_for_url(re.compile(rf"/class/{number}$"))
    wait_ready(teacher)
    expect(teacher.locator("#class-title")).to_have_text("9C Python")
    expect(teacher.locator("#live-state")).to_have_text("Live")
    expect(teacher.locator(".tile")).to_have_count(60)
    expect(teacher.locator("#class-side")).to_be_attached()  # kept for the class's messages and raised hands
    assert fully_visible_tiles(teacher) >= 30  # a school laptop's 1366x768
    # The display name a student chose shows as text.
    expect(tile(teacher, eve.username).locator(".tile-name")).to_have_text(HOSTILE + " Eve")

    # Tiles are updated in place: the element of a student stays the same one.
    teacher.evaluate("(u) => { document.querySelector(`.tile[data-username='${u}']`).kept = true; }", runners[0].username)

    # Ten students make the same mistake; three try to inject markup with
    # a file name, a forged traceback and plain output on stderr.
    for client in runners:
        save(client, "lesson2.py", LESSON)
    save(eve, f"{HOSTILE}.py", "total = 1 / 0\n")
    save(forger, "forge.py", "import sys\nsys.stderr.write('Traceback (most recent call last):\\n"
                             '  File "/home/student/<script>window.pwned=2</script>.py", line 3, in <module>\\n'
                             "ValueError: <img src=x onerror=window.pwned=3>\\n')\nsys.exit(1)\n")
    save(shouter, "shout.py",
         "import sys\nsys.stderr.write('<b onmouseover=window.pwned=4>look</b>\\n')\nsys.exit(1)\n")
    ended = run_all(server, [(c, "lesson2.py") for c in runners]
                    + [(eve, f"{HOSTILE}.py"), (forger, "forge.py"), (shouter, "shout.py")])
    assert [e["reason"] for e in ended] == ["error"] * 13

    first = teacher.locator(".error-group").first
    expect(first).to_contain_text("10 students: NameError `lenght` at line 4 of lesson2.py", timeout=WAIT)
    expect(tile(teacher, runners[0].username).locator(".tile-state")).to_have_text("NameError · lesson2.py:4")
    expect(tile(teacher, runners[0].username).locator(".tile-detail")).to_have_text("name 'lenght' is not defined")
    assert teacher.evaluate("(u) => document.querySelector(`.tile[data-username='${u}']`).kept", runners[0].username)
    # Their tiles, the others' and the groups show what the students wrote as text.
    expect(tile(teacher, eve.username).locator(".tile-state")).to_have_text(
        f"ZeroDivisionError · {HOSTILE}.py:1", timeout=WAIT)
    expect(tile(teacher, forger.username).locator(".tile-detail")).to_have_text(
        "<img src=x onerror=window.pwned=3>", timeout=WAIT)
    expect(tile(teacher, forger.username).locator(".tile-state")).to_have_text(
        "ValueError · <script>window.pwned=2</script>.py:3")
    expect(tile(teacher, shouter.username).locator(".tile-detail")).to_have_text(
        "<b onmouseover=window.pwned=4>look</b>", timeout=WAIT)
    groups = teacher.locator(".error-group")
    expect(groups).to_have_count(4)
    expect(groups.filter(has_text=f"at line 1 of {HOSTILE}.py")).to_contain_text("1 student: ZeroDivisionError")
    expect(groups.filter(has_text="ValueError")).to_contain_text(
        "1 student: ValueError: <img src=x onerror=window.pwned=3> at line 3 of <script>window.pwned=2</script>.py")
    expect(groups.filter(has_text="look</b>")).to_contain_text("1 student: <b onmouseover=window.pwned=4>look</b>")
    no_markup_ran(teacher)

    # A click on the group shows its ten students, and their names.
    first.locator(".group-btn").click()
    expect(teacher.locator(".tile:visible")).to_have_count(10)
    for client in runners:
        expect(tile(teacher, client.username)).to_be_visible()
    expect(first.locator(".group-names")).to_have_text(", ".join(f"Runner {i:02d}" for i in range(10)))
    # The group can be written to at once: the message form picks its ten.
    first.get_by_role("button", name="Write to these students").click()
    picked = teacher.locator("#class-side .talk-picker input:checked")
    expect(picked).to_have_count(10)
    assert sorted(picked.evaluate_all("(boxes) => boxes.map((b) => b.value)")) == sorted(c.username for c in runners)
    first.locator(".group-btn").click()  # and again: everyone
    expect(teacher.locator(".tile:visible")).to_have_count(60)

    # Filters, search and sorting.
    teacher.locator(".chip[data-filter=error]").click()
    expect(teacher.locator(".tile:visible")).to_have_count(13)
    expect(teacher.locator(".chip[data-filter=error] .chip-count")).to_have_text("13")
    teacher.locator(".chip[data-filter=all]").click()
    teacher.get_by_label("Find a student").fill("quiet student 0")
    expect(teacher.locator(".tile:visible")).to_have_count(10)
    teacher.get_by_label("Find a student").fill("")
    expect(teacher.locator(".tile:visible")).to_have_count(60)  # the search is applied as typing pauses
    teacher.get_by_label("Sort by").select_option("state")
    expect(teacher.locator(".tile").first).to_have_attribute("data-state", "error")
    assert fully_visible_tiles(teacher) >= 30
    shot(teacher, "40-class-view-1366")
    teacher.get_by_label("Sort by").select_option("name")
    expect(teacher.locator(".tile").first.locator(".tile-name")).to_have_text(HOSTILE + " Eve")

    # A click on a tile selects the student and opens their detail: their console as they saw it.
    tile(teacher, shouter.username).locator("button").click()
    expect(tile(teacher, shouter.username)).to_have_class(re.compile(r"\bselected\b"))
    expect(tile(teacher, shouter.username).locator("button")).to_have_attribute("aria-pressed", "true")
    drawer = teacher.locator("#class-detail")
    expect(drawer.locator("#class-detail-title")).to_have_text(f"Shouter ({shouter.username})")
    expect(drawer.locator(".detail-output")).to_contain_text("<b onmouseover=window.pwned=4>look</b>", timeout=WAIT)
    assert drawer.locator(".detail-output b").count() == 0
    shot(teacher, "42-class-view-student-detail")
    # Beside the class, not over it: the mistakes, the hands and tiles stay in view, uncovered.
    box = drawer.bounding_box()
    for side in ("#class-mistakes", "#class-side"):
        aside = teacher.locator(side).bounding_box()
        assert aside["x"] >= box["x"] + box["width"] - 1 and aside["width"] > 200, (side, aside, box)
    visible_tiles = [b for b in (t.bounding_box() for t in teacher.locator(".tile").all()[:20]) if b]
    uncovered = [b for b in visible_tiles if b["x"] + b["width"] <= box["x"] + 1 and b["y"] + b["height"] <= 768]
    assert len(uncovered) >= 10, (len(uncovered), box)
    # A new password for them, from there.
    drawer.get_by_role("button", name="Reset password of Shouter").click()
    teacher.get_by_role("dialog").get_by_role("button", name="Reset password").click()
    made = teacher.get_by_role("dialog", name="New password for Shouter")
    expect(made.locator(f'tr[data-username="{shouter.username}"]')).to_be_visible()
    made.get_by_role("button", name="Done").click()
    teacher.get_by_role("dialog", name="Close without printing or downloading?").locator("button.btn.danger").click()
    expect(teacher.get_by_role("dialog")).to_have_count(0)
    drawer.get_by_role("button", name="Close the student's detail").click()
    expect(drawer).to_be_hidden()
    expect(tile(teacher, shouter.username)).not_to_have_class(re.compile(r"\bselected\b"))
    # New passwords and slips for the class, from the top bar: the dialog counts its 60.
    teacher.get_by_role("button", name="New passwords and slips").click()
    ask = teacher.get_by_role("dialog")
    expect(ask).to_contain_text("All active students of 9C Python (60)")
    ask.get_by_role("button", name="Cancel").click()
    no_markup_ran(teacher)

    # A projector's 1920x1080: the whole class at once.
    wide = new_page(server, viewport={"width": 1920, "height": 1080})
    login(wide, "grace", "grace-password", lands_on="/teacher")
    wide.goto(f"/class/{number}")
    wait_ready(wide)
    expect(wide.locator(".tile")).to_have_count(60)
    expect(wide.locator(".error-group").first).to_contain_text("10 students", timeout=WAIT)
    wide.get_by_label("Sort by").select_option("state")
    assert fully_visible_tiles(wide) == 60
    shot(wide, "41-class-view-1920")
    no_markup_ran(wide)


def test_only_the_classs_teachers_and_admins_open_its_view(start_server, new_page):
    server = start_server(processes=1, **LIMITS)
    people = People(server)
    ada = people.student("ada")
    mine, theirs = people.teacher("mine", log_in=False), people.teacher("theirs", log_in=False)
    number = a_class(server, mine, ada, name="8A")
    a_class(server, theirs, name="8B")

    page = new_page(server)
    page.goto(f"/class/{number}")  # not signed in: the sign-in page, which comes back here
    page.wait_for_url(re.compile(r"/\?next="))
    login(page, theirs.username, PASSWORD, lands_on="/teacher")
    page.goto(f"/class/{number}")
    wait_ready(page)
    expect(page.get_by_role("alert")).to_contain_text("You do not teach this class")
    expect(page.locator(".tile")).to_have_count(0)
    page.goto("/class/999999999")
    wait_ready(page)
    expect(page.get_by_role("alert")).to_contain_text("There is no such class")

    student_page = new_page(server)
    login(student_page, ada.username, PASSWORD, lands_on="/ide")
    student_page.goto(f"/class/{number}")
    student_page.wait_for_url(re.compile(r"/ide$"))

    staff_accounts = ((mine.username, PASSWORD, "/teacher"), ("admin", server.env["ADMIN_PASSWORD"], "/admin"))
    for who, password, home in staff_accounts:
        staff = new_page(server)
        login(staff, who, password, lands_on=home)
        staff.goto(f"/class/{number}")
        wait_ready(staff)
        expect(staff.locator(".tile")).to_have_count(1)
        expect(tile(staff, ada.username)).to_contain_text("No run yet")
        assert staff.errors == []
