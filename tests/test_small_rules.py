"""Small rules of several services, each a pure function or an object
without a database: device cookies (accounts/devices.py), class names
(accounts/memberships.py), course folder specs (teaching/classes.py), the
text of a message to a class (teaching/talk.py) and the guarding of the
class view's hooks (runs/events.py)."""
import logging

import pytest

from server.accounts import devices as devices_module
from server.accounts.devices import Devices
from server.accounts.memberships import valid_name
from server.errors import Refused
from server.runs.events import Guarded, home_path
from server.teaching import classes, talk

SECRET = "s" * 40


def test_a_browser_that_signed_in_is_known_again_for_that_user_only():
    devices = Devices(SECRET)
    cookie = devices.issue(None, "ada")
    nonce = devices.trusted(cookie, "ada")
    assert nonce is not None and len(nonce) == 16
    assert devices.trusted(cookie, "alan") is None


def test_a_token_signed_with_another_secret_or_changed_is_not_trusted():
    cookie = Devices(SECRET).issue(None, "ada")
    assert Devices("t" * 40).trusted(cookie, "ada") is None
    username, nonce, mac = cookie.split(":")
    assert Devices(SECRET).trusted(f"alan:{nonce}:{mac}", "alan") is None
    assert Devices(SECRET).trusted(f"ada:{nonce[:-1]}A:{mac}", "ada") is None


def test_a_shared_computer_keeps_the_last_users_and_a_new_sign_in_renews_its_own():
    devices = Devices(SECRET)
    cookie = None
    for n in range(devices_module.MAX_TOKENS + 2):
        cookie = devices.issue(cookie, f"s{n}")
    known = [f"s{n}" for n in range(devices_module.MAX_TOKENS + 2) if devices.trusted(cookie, f"s{n}")]
    assert known == [f"s{n}" for n in range(2, devices_module.MAX_TOKENS + 2)]
    before = devices.trusted(cookie, "s5")
    cookie = devices.issue(cookie, "s5")
    assert cookie.count("s5:") == 1 and devices.trusted(cookie, "s5") != before
    assert cookie.split("~")[-1].startswith("s5:")


@pytest.mark.parametrize("cookie", [None, 3, "", "~~~", "ada", "ada:x:y", "a:b:c:d", "é:" + "a" * 16 + ":x"])
def test_what_is_not_a_token_is_ignored(cookie):
    devices = Devices(SECRET)
    assert devices.trusted(cookie, "ada") is None
    assert devices.trusted(devices.issue(cookie, "ada"), "ada") is not None


@pytest.mark.parametrize("name, kept", [("Maths 1", "Maths 1"), ("  Year 9 ", "Year 9"), ("x" * 100, "x" * 100)])
def test_a_class_name_is_kept_trimmed(name, kept):
    assert valid_name(name) == kept


@pytest.mark.parametrize("name, said", [
    ("   ", "The class name is empty."), (None, "The class name is empty."),
    ("x" * 101, "The class name must have at most 100 characters."),
    ("Maths\n1", "The class name may not contain the character U+000A."),
])
def test_a_class_name_that_cannot_be_shown_is_refused_with_a_sentence(name, said):
    with pytest.raises(Refused) as refused:
        valid_name(name)
    assert refused.value.code == "invalid_name" and refused.value.message == said


@pytest.mark.parametrize("spec, class_id", [("course", None), ("class/7", 7), ("class/" + "9" * 18, int("9" * 18))])
def test_a_course_folder_spec_names_a_class(spec, class_id):
    assert classes.class_id_of(spec) == class_id
    if class_id is not None:
        assert classes.spec_of(class_id, False) == spec
    assert classes.spec_of(3, True) == "course"


@pytest.mark.parametrize("spec", ["class/", "class/x", "class/-1", "class/1/", "class/" + "9" * 19, "home", "checks/3",
                                  "class/7\n", "Class/7"])
def test_anything_else_is_no_such_class(spec):
    with pytest.raises(Refused) as refused:
        classes.class_id_of(spec)
    assert (refused.value.status, refused.value.code) == (404, "no_such_class")


@pytest.mark.parametrize("text, kept", [
    ("  Look at line 3  ", "Look at line 3"),
    ("two\nlines\tand a tab", "two\nlines\tand a tab"),
    ("bell\x07 and escape\x1b[31m", "bell and escape[31m"),
    ("\u202edir", "dir"),
    ("é ü 李", "é ü 李"),
])
def test_a_message_keeps_its_text_without_control_characters(text, kept):
    assert talk._clean(text, "Your message", 100) == kept


def test_a_message_too_long_says_how_long_it_is_and_what_fits():
    with pytest.raises(Refused) as refused:
        talk._clean("x" * 101 + "\x00" * 50, "Your message", 100)
    assert refused.value.code == "too_long"
    assert refused.value.message == "Your message is 101 characters long; at most 100 fit."


@pytest.mark.parametrize("file, path", [
    ("/home/student/main.py", "main.py"),
    ("/home/student/lesson/a.py", "lesson/a.py"),
    ("/home/student/", None),
    ("/data/storage/home/ada/main.py", "main.py"),  # the local sandbox: the home's real folder
    ("/data/storage/home/adam/main.py", None),  # another student's home is not hers
    ("/usr/lib/python3.11/random.py", None),
    ("<string>", None),
])
def test_a_traceback_file_is_in_the_students_home_or_none(file, path):
    assert home_path(file, "ada") == path


def test_a_class_view_hook_that_fails_is_logged_and_never_reaches_the_run(caplog):
    heard = []

    class Events:
        def student_online(self, user, online):
            heard.append(("online", online))

        def run_started(self, user):
            raise RuntimeError("the class view is broken")

        def run_ended(self, user, exit_message, error):
            heard.append(("ended", exit_message["reason"]))

        def run_console(self, user, message):
            raise KeyError("type")

    guarded = Guarded(Events())
    with caplog.at_level(logging.ERROR):
        guarded.student_online({"id": 1}, True)
        guarded.run_started({"id": 1})
        guarded.run_ended({"id": 1}, {"reason": "exited"}, None)
        guarded.run_console({"id": 1}, {})
    assert heard == [("online", True), ("ended", "exited")]
    assert [r.getMessage() for r in caplog.records] == ["telling the class view of a run failed"] * 2
