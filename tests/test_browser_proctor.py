"""The proctor view in Chromium (issue 33): the class view of an exam,
opened from the exam's students, shows all 150 students of a big exam on
one 1920x1080 screen (and 40 or more on a 1366x768 laptop), each tile with
the time left counting down, the last save, the last run and the flags; a
signal a student's page sends shows on her tile live; a click opens her
exam file, her console and her signal timeline, which grows live too."""
import re
from datetime import datetime, timedelta, timezone

from tests.browser import LIMITS, assert_accessible, expect, login, shot, wait_ready
from tests.conftest import PASSWORD, People
from tests.live_support import a_class
from tests.test_browser_classroom import fully_visible_tiles, tile
from tests.test_browser_exam import EXERCISE

BIG = {"width": 1920, "height": 1080}
LAPTOP = {"width": 1366, "height": 768}


def test_a_teacher_proctors_150_students_on_one_screen(start_server, new_page):
    server = start_server(**LIMITS)
    people = People(server)
    ada = people.student("ada", display_name="Ada Lovelace")
    others = [people.student(f"s{i:03d}", display_name=f"Student {i:03d}", log_in=False) for i in range(149)]
    grace = people.teacher("grace", display_name="Grace Hopper")
    number = a_class(server, grace, ada, *others, name="Exam hall")
    assert grace.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE).status_code == 200
    r = grace.post(f"/api/classes/{number}/exams", json={"title": "Final", "exercises": ["average"], "minutes": 30})
    assert r.status_code == 201, r.text
    exam = r.json()["exam"]
    signals = f"/api/exams/{exam['id']}/signals"
    r = ada.request("PUT", f"/api/files/exam/{exam['id']}/answer.py", data=b"print('my answer')\n",
                    headers={"If-Match": "*"})
    assert r.status_code == 200, r.text
    assert ada.request("POST", signals, json={"kind": "paste", "chars": 120, "outside": True}).status_code == 201

    page = new_page(server, viewport=BIG)
    login(page, grace.username, PASSWORD, lands_on="/teacher")
    page.get_by_role("combobox", name="Class", exact=True).select_option(label="Exam hall")
    page.get_by_role("region", name="Exams").locator(".exam-row").first.get_by_role("button").click()
    page.get_by_role("dialog", name="Final: students").get_by_role("link", name="Open the proctor view").click()
    page.wait_for_url(re.compile(rf"/class/{number}\?exam={exam['id']}$"))
    wait_ready(page)
    expect(page.locator("#class-title")).to_have_text("Exam Final · Exam hall")
    expect(page.locator("#live-state")).to_have_text("Live")
    expect(page.locator(".tile")).to_have_count(150)
    assert fully_visible_tiles(page) == 150  # the whole exam, without scrolling
    shot(page, "84-proctor-150")

    hers = tile(page, ada.username)
    expect(hers).to_contain_text("1 paste from outside")
    expect(hers).to_contain_text("saved just now")
    timer = hers.locator(".tile-time")
    expect(timer).to_have_text(re.compile(r"^(29|30):\d\d$"))
    shown = timer.text_content()
    expect(timer).not_to_have_text(shown)  # it counts down, on the server's clock
    quiet = tile(page, others[0].username)
    expect(quiet).to_contain_text("no flags")
    expect(quiet).to_contain_text("not saved yet")

    # A signal from her page reaches her tile, and the Flagged filter finds her alone.
    assert ada.request("POST", signals, json={"kind": "focus_lost"}).status_code == 201
    expect(hers).to_contain_text("left the page 1×")
    page.get_by_role("button", name=re.compile("^Flagged")).click()
    expect(page.locator(".tile:not([hidden])")).to_have_count(1)
    expect(page.locator(".class-summary")).to_have_text("1 of 150 shown")
    shot(page, "85-proctor-view")

    # Her detail: her exam file, her console, her signals, the timeline growing live.
    hers.get_by_role("button").click()
    drawer = page.locator("#class-detail")
    expect(drawer.locator(".drawer-title")).to_have_text(f"Ada Lovelace ({ada.username})")
    expect(drawer.locator(".detail-file-name")).to_have_text("answer.py")
    expect(drawer.locator(".detail-code .cm-content")).to_contain_text("print('my answer')")
    expect(drawer.locator(".detail-run-state")).to_have_text("No run to show yet")
    timeline = drawer.get_by_role("list", name="Their signals, oldest first")
    expect(timeline.locator("li")).to_have_count(2)
    expect(timeline.locator("li").first).to_contain_text("pasted 120 characters, from outside the IDE")
    expect(timeline.locator("li").last).to_contain_text("left the page")
    assert ada.request("POST", signals, json={"kind": "offline"}).status_code == 201
    expect(timeline.locator("li")).to_have_count(3)
    expect(timeline.locator("li").last).to_contain_text("lost the network")
    r = ada.request("PUT", f"/api/files/exam/{exam['id']}/answer.py", data=b"print('changed my mind')\n",
                    headers={"If-Match": "*"})
    assert r.status_code == 200, r.text
    expect(drawer.locator(".detail-code .cm-content")).to_contain_text("changed my mind")  # her save, live
    assert_accessible(page, "the proctor view with a student's detail")
    shot(page, "86-proctor-detail")

    # By keyboard: Escape in the detail closes it; a tile opens it again with Enter.
    drawer.get_by_role("button", name="Close the student's detail").focus()
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    page.get_by_role("button", name=re.compile("^All")).click()
    expect(page.locator(".tile:not([hidden])")).to_have_count(150)
    tile(page, others[1].username).get_by_role("button").focus()
    page.keyboard.press("Enter")
    expect(drawer.locator(".drawer-title")).to_have_text(f"Student 001 ({others[1].username})")
    expect(drawer.locator(".signal-note")).to_have_text("No signals yet.")
    expect(drawer.locator(".detail-file-name")).to_have_text("No file in their exam folder yet")
    drawer.get_by_role("button", name="Close the student's detail").press("Enter")
    expect(drawer).to_be_hidden()

    page.set_viewport_size(LAPTOP)
    assert fully_visible_tiles(page) >= 40  # a school laptop
    shot(page, "87-proctor-laptop")
    assert_accessible(page, "the proctor view on a laptop")
    assert page.errors == []


def test_the_proctor_view_of_an_exam_of_another_class_says_what_to_do(start_server, new_page):
    server = start_server(**LIMITS)
    people = People(server)
    grace, other = people.teacher("grace"), people.teacher("other")
    number = a_class(server, grace, people.student("ada"))
    theirs = a_class(server, other, grace, people.student("bob"))
    assert other.request("PUT", f"/api/classes/{theirs}/exercises/average", json=EXERCISE).status_code == 200
    r = other.post(f"/api/classes/{theirs}/exams", json={"title": "Theirs", "exercises": ["average"], "minutes": 30})
    assert r.status_code == 201, r.text
    page = new_page(server)
    login(page, grace.username, PASSWORD, lands_on="/teacher")
    page.goto(f"/class/{number}?exam={r.json()['exam']['id']}")
    wait_ready(page)
    expect(page.get_by_role("alert")).to_contain_text("This exam is of another class")
    page.goto(f"/class/{number}?exam=999999999")
    wait_ready(page)
    expect(page.get_by_role("alert")).to_contain_text("There is no such exam")
    assert_accessible(page, "a proctor view refused")


def test_each_tile_counts_to_the_students_own_end(start_server, new_page):
    """Extra time is per student: at the exam's end the others' tiles say
    over (and Time over finds them), hers still counts; an exam that has
    not started says so."""
    server = start_server(**LIMITS)
    people = People(server)
    grace, ada, bob = people.teacher("grace"), people.student("ada"), people.student("bob")
    number = a_class(server, grace, ada, bob)
    assert grace.request("PUT", f"/api/classes/{number}/exercises/average", json=EXERCISE).status_code == 200
    ends = datetime.now(timezone.utc) + timedelta(seconds=3)
    r = grace.post(f"/api/classes/{number}/exams", json={"title": "Short", "exercises": ["average"],
                                                         "ends": ends.isoformat()})
    assert r.status_code == 201, r.text
    short = r.json()["exam"]
    r = grace.request("PUT", f"/api/exams/{short['id']}/students/{ada.username}/extra", json={"minutes": 10})
    assert r.status_code == 200, r.text
    r = grace.post(f"/api/classes/{number}/exams", json={"title": "Later", "exercises": ["average"],
                                                         "starts": (ends + timedelta(hours=1)).isoformat(),
                                                         "minutes": 30})
    assert r.status_code == 201, r.text
    later = r.json()["exam"]

    page = new_page(server)
    login(page, grace.username, PASSWORD, lands_on="/teacher")
    page.goto(f"/class/{number}?exam={short['id']}")
    wait_ready(page)
    expect(tile(page, bob.username).locator(".tile-time")).to_have_text("over")  # (hang guard: 3 s to go)
    expect(tile(page, ada.username).locator(".tile-time")).to_have_text(re.compile(r"^(9|10):\d\d$"))
    page.get_by_role("button", name=re.compile("^Time over")).click()
    expect(page.locator(".tile:not([hidden])")).to_have_count(1)
    expect(page.locator(".tile:not([hidden])")).to_have_attribute("data-username", bob.username)

    page.goto(f"/class/{number}?exam={later['id']}")
    wait_ready(page)
    expect(tile(page, ada.username).locator(".tile-time")).to_have_text("not started")
    assert_accessible(page, "the proctor view of an exam not started")
    assert page.errors == []
