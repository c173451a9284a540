"""The account rules every door applies (server/accounts/rules.py), a
class list's CSV read into checked rows (class_list.py), and the sign-in
throttle's arithmetic and sentences (throttle.py, service.py): pure
functions, no database."""
import pytest
from hypothesis import given, strategies as st

from server import config
from server.accounts import class_list, rules, throttle
from server.accounts.service import throttled_message
from server.accounts.throttle import Claim
from server.errors import Refused


@pytest.mark.parametrize("username", ["ada", "a", "0", "ada.lovelace", "ada_l", "ada-l", "s1", "a" * 64])
def test_a_username_of_the_allowed_characters_is_taken(username):
    assert rules.username_problem(username) is None


@pytest.mark.parametrize("username", ["", "Ada", ".ada", "-ada", "_ada", "ada lovelace", "ada@school", "a" * 65,
                                      "adá", "ada\n", None, 3])
def test_any_other_username_says_what_a_username_is(username):
    assert rules.username_problem(username) == ("a username is 1 to 64 lowercase letters, digits, '.', '_' or '-', "
                                                "starting with a letter or digit")


@pytest.mark.parametrize("password, problem", [
    ("12345678", None), ("x" * 256, None), ("correct horse", None), ("ünïcødé!", None),
    ("1234567", "the password must have at least 8 characters"),
    ("", "the password must have at least 8 characters"),
    ("x" * 257, "the password must have at most 256 characters"),
    (12345678, "the password must be text"),
])
def test_a_password_is_text_of_8_to_256_characters(password, problem):
    assert rules.password_problem(password) == problem


@pytest.mark.parametrize("name, problem", [
    ("Ada Lovelace", None), ("李小龍", None), ("O'Brien-Smith", None), ("क्ष", None),
    ("a\u200dz", None),  # a joiner, which some scripts need
    ("", "the display name is empty"), (None, "the display name is empty"),
    ("x" * 201, "the display name must have at most 200 characters"),
    ("Ada\nLovelace", "the display name may not contain the character U+000A"),
    ("Ada\x00", "the display name may not contain the character U+0000"),
    ("Ada\u202eecalevoL", "the display name may not contain the character U+202E"),
    ("Ada\u2028", "the display name may not contain the character U+2028"),
    ("Ada\u2066x", "the display name may not contain the character U+2066"),
])
def test_a_display_name_is_shown_to_people_as_it_reads(name, problem):
    assert rules.display_name_problem(name) == problem


def test_a_class_name_has_its_own_bound():
    assert rules.class_name_problem("x" * 100) is None
    assert rules.class_name_problem("x" * 101) == "the class name must have at most 100 characters"


@pytest.mark.parametrize("role, ok", [("student", True), ("teacher", True), ("admin", True), ("Admin", False),
                                      ("root", False), (None, False)])
def test_a_role_is_one_of_three(role, ok):
    assert (rules.role_problem(role) is None) == ok


def test_a_new_account_is_normalized_or_refused_with_its_first_problem_as_a_sentence():
    assert rules.check_new_account("  Ada ", " Ada Lovelace ", "student") == ("ada", "Ada Lovelace")
    with pytest.raises(Refused) as refused:
        rules.check_new_account("ada", "Ada", "pirate", "short")
    assert refused.value.code == "invalid_account"
    assert refused.value.message == "Unknown role 'pirate' (expected student, teacher, admin)."
    assert rules.new_account_problems("ada", "Ada", "pirate", "short") == [
        "unknown role 'pirate' (expected student, teacher, admin)", "the password must have at least 8 characters"]


@given(st.text(max_size=70))
def test_a_username_is_taken_exactly_when_the_database_would_take_it(username):
    ok = (0 < len(username) <= 64 and username[0] in "abcdefghijklmnopqrstuvwxyz0123456789"
          and all(c in "abcdefghijklmnopqrstuvwxyz0123456789._-" for c in username))
    assert (rules.username_problem(username) is None) == ok


# -- a class list ---------------------------------------------------------------------

def test_a_class_list_with_a_header_gives_a_row_per_student():
    rows = class_list.parse_csv("\ufeffusername,display_name,role,password,class\n"
                                "ADA ,Ada Lovelace,Student,,Maths 1\n\n"
                                "alan,Alan Turing,teacher,secret-password\n")
    assert rows == [class_list.Row(2, "ada", "Ada Lovelace", "student", None, None, "Maths 1"),
                    class_list.Row(4, "alan", "Alan Turing", "teacher", "secret-password", None, None)]


def test_without_a_header_the_first_row_is_a_student():
    rows = class_list.parse_csv("ada,Ada,student\n")
    assert [(r.line, r.username, r.problem) for r in rows] == [(1, "ada", None)]


@pytest.mark.parametrize("line, problem", [
    ("ada,Ada", "expected 3 to 5 columns (username, display_name, role, password, class), found 2"),
    ("ada,Ada,student,pw12345678,Maths,extra", "expected 3 to 5 columns"),
    ("Ada Lovelace,Ada,student", "a username is 1 to 64 lowercase letters"),
    ("ada,,student", "the display name is empty"),
    ("ada,Ada,pupil", "unknown role 'pupil'"),
    ("ada,Ada,student,short", "the password must have at least 8 characters"),
    ("ada,Ada,admin,,Maths 1", "an admin is in no class (admins reach every class)"),
    ("ada,Ada,student,," + "c" * 101, "the class name must have at most 100 characters"),
    ("ada,Ada\u202e,student", "the display name may not contain the character U+202E"),
])
def test_a_row_that_cannot_be_an_account_says_why(line, problem):
    rows = class_list.parse_csv(line + "\n")
    assert len(rows) == 1 and problem in rows[0].problem


def test_every_problem_of_a_row_is_said_together():
    (row,) = class_list.parse_csv("Bad Name,,pupil,short\n")
    assert row.problem.count("; ") == 3


def test_a_username_twice_names_the_line_it_is_on_first():
    rows = class_list.parse_csv("ada,Ada,student\nalan,Alan,student\nADA,Ada again,student\n")
    assert [r.problem for r in rows] == [None, None, "username 'ada' is also on line 1"]


def test_a_school_address_in_the_password_column_is_the_accounts_address_not_a_password():
    rows = class_list.parse_csv("ada,Ada,student,Ada.Lovelace@School.org,Maths 1\n"
                                "alan,Alan,student,not-an-address@\n"
                                "grace,Grace,teacher,ada.lovelace@school.org\n")
    assert rows[0] == class_list.Row(1, "ada", "Ada", "student", None, None, "Maths 1", "ada.lovelace@school.org")
    assert rows[1].problem == "'not-an-address@' is not an e-mail address such as ada@school.org"
    assert rows[2].problem == "address 'ada.lovelace@school.org' is also on line 1"


def test_a_field_over_the_csv_limit_is_one_wrong_line_and_the_next_are_read():
    rows = class_list.parse_csv('ada,"' + "x" * 200000 + '",student\nalan,Alan,student\n')
    assert rows[0].problem.startswith("not readable as CSV: ") and rows[-1].username == "alan"
    assert rows[-1].problem is None


# -- the sign-in throttle -----------------------------------------------------------------

@pytest.mark.parametrize("failures, wait", [(0, 0), (4, 0), (5, 2), (6, 4), (7, 8), (12, 256), (13, 300), (500, 300)])
def test_past_the_free_failures_each_waits_twice_as_long_up_to_the_window(failures, wait):
    cfg = config.load({"LOGIN_FAILURES_PER_USER": "5", "LOGIN_THROTTLE_WINDOW": "300"})
    assert throttle.backoff(failures, cfg) == wait


@pytest.mark.parametrize("claim, said", [
    (Claim(1, "device"), "Too many failed sign-ins on this browser. Try again in 1 second."),
    (Claim(30, "account"), "Too many failed sign-ins for this account. Try again in 30 seconds. You can still sign in "
                           "on a computer you have signed in on before. If you forgot your password, ask your "
                           "teacher to reset it."),
    (Claim(121, "network"), "Too many failed sign-ins from your network. Try again in 3 minutes. You can still sign in "
                            "on a computer you have signed in on before."),
    (Claim(120, "device"), "Too many failed sign-ins on this browser. Try again in 2 minutes."),
])
def test_a_refused_sign_in_says_how_long_to_wait_and_what_else_works(claim, said):
    assert throttled_message(claim) == said


@pytest.mark.parametrize("wait, seconds", [(0.2, 1), (1.0, 1), (1.01, 2), ("2.5", 3), (0, 1)])
def test_a_wait_is_told_in_whole_seconds_never_none(wait, seconds):
    assert throttle._seconds(wait) == seconds
