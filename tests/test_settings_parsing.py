"""Settings read in-process (config.load over a dict, no server started):
the range each whole-number setting documents (docs/settings.md, --help) is
the one enforced, choices and switches take every spelling the table
promises, a refusal is one sentence naming the variable and never shows a
secret, and any text either parses or is refused that way."""
import re

import pytest
from hypothesis import given, strategies as st

from server import config

INTEGERS = [s for s in config.SETTINGS if re.fullmatch(r"\d+\.\.\d+.*", s.parse.allowed)]
CHOICES = [s for s in config.SETTINGS if "|" in s.parse.allowed and s.parse.allowed != "0|1"]
SWITCHES = [s for s in config.SETTINGS if s.parse.allowed == "0|1"]


def bounds(setting):
    lo, hi = re.match(r"(\d+)\.\.(\d+)", setting.parse.allowed).groups()
    return int(lo), int(hi)


def refusal(environ):
    with pytest.raises(config.ConfigError) as refused:
        config.load(environ)
    return str(refused.value)


def test_the_defaults_load_and_storage_goes_under_the_data_folder(tmp_path):
    cfg = config.load({"DATA_DIR": str(tmp_path)})
    assert cfg.STORAGE_ROOT == str(tmp_path / "storage")
    assert cfg.PUBLIC_URL == "" and cfg.PUBLIC_URL_GUESSED is True
    for s in INTEGERS:
        assert getattr(cfg, s.name) == int(s.default), s.name


def test_the_table_sorts_every_setting_into_a_kind_tested_here():
    # A new kind of setting (a parser with another `allowed`) needs tests of its own.
    kinds = INTEGERS + CHOICES + SWITCHES
    others = {s.name for s in config.SETTINGS if s not in kinds}
    assert others == {"HOST", "PUBLIC_URL", "DATABASE_URL", "DATA_DIR", "STORAGE_ROOT", "COOKIE_SECRET",
                      "ADMIN_PASSWORD", "SANDBOX_PYTHON", "SANDBOX_IMAGE", "RUNNERS", "RUNNER_SECRET",
                      "RUNNER_FLEET", "RUNNER_FLEET_KEY", "CLOUDWATCH_NAMESPACE", "OIDC_ISSUERS"}
    assert len(INTEGERS) > 40


@pytest.mark.parametrize("setting", INTEGERS, ids=lambda s: s.name)
def test_a_whole_number_setting_holds_the_range_it_documents(setting):
    lo, hi = bounds(setting)
    assert getattr(config.load({setting.name: str(lo)}), setting.name) == lo
    assert getattr(config.load({setting.name: f" {hi}\n"}), setting.name) == hi
    for wrong in (str(lo - 1), str(hi + 1), "1.5", "ten", ""):
        said = refusal({setting.name: wrong})
        assert said.startswith(f"{setting.name}={wrong!r} is not valid: expected a whole number from {lo} to {hi}")
        assert "\n" not in said


@pytest.mark.parametrize("setting", CHOICES, ids=lambda s: s.name)
def test_a_choice_takes_any_letter_case_and_gives_it_as_the_table_writes_it(setting):
    options = setting.parse.allowed.split("|")
    for option in options:
        for spelling in (option, option.upper(), option.lower().title(), f"  {option.lower()} "):
            assert getattr(config.load({setting.name: spelling}), setting.name) == option
    said = refusal({setting.name: "something-else"})
    assert said == f"{setting.name}='something-else' is not valid: expected one of {', '.join(options)}"


@pytest.mark.parametrize("setting", SWITCHES, ids=lambda s: s.name)
def test_a_switch_takes_the_usual_spellings_of_on_and_off(setting):
    for on in ("1", "true", "YES", " On "):
        assert getattr(config.load({setting.name: on}), setting.name) is True
    for off in ("0", "false", "no", "OFF", ""):
        assert getattr(config.load({setting.name: off}), setting.name) is False
    assert "expected 1/0, true/false, yes/no or on/off" in refusal({setting.name: "maybe"})


@pytest.mark.parametrize("value", ["mysql://u:p@h/db", "postgres:/no-slashes", "localhost:5432"])
def test_a_database_url_that_is_not_postgresql_is_refused_without_its_password(value):
    said = refusal({"DATABASE_URL": value})
    assert said.startswith("DATABASE_URL=") and "expected empty (embedded PostgreSQL)" in said
    assert ":p@" not in said


def test_a_database_url_keeps_all_but_its_password_when_shown():
    setting = config.BY_NAME["DATABASE_URL"]
    assert setting.shown("postgresql://app:hunter2@db:5432/pyc") == "postgresql://app:********@db:5432/pyc"
    assert setting.shown("postgresql://db/pyc") == "postgresql://db/pyc"
    cfg = config.load({"DATABASE_URL": "postgresql://app:hunter2@db/pyc", "COOKIE_SECRET": "s" * 40,
                       "ADMIN_PASSWORD": "swordfish"})
    shown = dict(cfg.masked())
    assert "hunter2" not in shown["DATABASE_URL"] and shown["COOKIE_SECRET"] == shown["ADMIN_PASSWORD"] == "********"


@pytest.mark.parametrize("name", ["COOKIE_SECRET", "RUNNER_SECRET"])
def test_a_short_secret_is_refused_and_not_printed(name):
    said = refusal({name: "too-short-secret"})
    assert said.startswith(f"{name}='********' is not valid: expected at least 32 characters")
    assert "too-short" not in said
    assert getattr(config.load({name: "x" * 32}), name) == "x" * 32


def test_runners_are_ids_and_websocket_addresses_each_named_once():
    assert config.load({}).RUNNERS == ()
    assert config.load({"RUNNERS": " r1=ws://10.0.0.5:8790  big-2=wss://runner.lan/ \n"}).RUNNERS == (
        ("r1", "ws://10.0.0.5:8790"), ("big-2", "wss://runner.lan"))
    for wrong in ("r1", "r1=http://10.0.0.5:8790", "R1=ws://a:1", "r1=ws://a:1/path", "r1=ws://",
                  "r1=ws://a:1 r1=ws://b:2", "=ws://a:1", "-r=ws://a:1"):
        said = refusal({"RUNNERS": wrong})
        assert said.startswith(f"RUNNERS={wrong!r} is not valid: expected ") and "\n" not in said, said


def test_a_cloudwatch_namespace_is_one_cloudwatch_takes():
    assert config.load({"CLOUDWATCH_NAMESPACE": "PyClassroom/prod-stack"}).CLOUDWATCH_NAMESPACE == \
        "PyClassroom/prod-stack"
    for wrong in ("AWS/ECS", "has space", "x" * 256, "ümlaut"):
        said = refusal({"CLOUDWATCH_NAMESPACE": wrong})
        assert said.startswith(f"CLOUDWATCH_NAMESPACE={wrong!r} is not valid: expected "), said


def test_a_runner_fleet_is_a_name_and_its_key_64_hex_digits_never_printed():
    key = "0123456789abcdef" * 4
    loaded = config.load({"RUNNER_FLEET": "ecs-runners", "RUNNER_FLEET_KEY": key})
    assert (loaded.RUNNER_FLEET, loaded.RUNNER_FLEET_KEY) == ("ecs-runners", key)
    assert (config.load({}).RUNNER_FLEET, config.load({}).RUNNER_FLEET_KEY) == ("", "")
    for wrong in ("ECS", "-ecs", "a" * 30, "ecs runners", "ecs_1"):
        assert refusal({"RUNNER_FLEET": wrong}).startswith(f"RUNNER_FLEET={wrong!r} is not valid: expected ")
    for wrong in ("0123", key.upper(), key + "0", "g" * 64, "secret-of-the-fleet-with-64-characters" + "x" * 26):
        said = refusal({"RUNNER_FLEET_KEY": wrong})
        assert said.startswith("RUNNER_FLEET_KEY='********' is not valid: expected 64 hex digits"), said
        assert wrong not in said


@pytest.mark.parametrize("value, kept", [
    ("http://10.0.0.5:8888", "http://10.0.0.5:8888"),
    ("https://py.school.org/", "https://py.school.org"),
    ("https://py.school.org/class/", "https://py.school.org/class"),
    ("  http://[2001:db8::1]:8888  ", "http://[2001:db8::1]:8888"),
])
def test_a_public_url_is_kept_without_its_trailing_slash(value, kept):
    cfg = config.load({"PUBLIC_URL": value})
    assert cfg.PUBLIC_URL == kept and cfg.PUBLIC_URL_GUESSED is False


@pytest.mark.parametrize("value", ["10.0.0.5:8888", "ftp://school.lan", "http://admin:pw@school.lan",
                                   "http://school.lan:99999", "http://school.lan/?q=1", "http://school.lan/#top",
                                   "http://", "http://school lan", "http://" + "a" * 200 + ".lan"])
def test_a_public_url_students_could_not_type_is_refused(value):
    assert "expected empty (a guess) or an address such as http://10.0.0.5:8888" in refusal({"PUBLIC_URL": value})


@pytest.mark.parametrize("value, ok", [("0.0.0.0", True), ("127.0.0.1", True), ("::", True), ("[::1]", True),
                                       ("py.school.lan", True), ("", False), ("host name", False),
                                       ("0.0.0.0;rm", False), ("école.lan", False)])
def test_host_is_a_name_or_an_address(value, ok):
    if ok:
        assert config.load({"HOST": value}).HOST == value
    else:
        assert "expected a host name or IP address" in refusal({"HOST": value})


def test_a_folder_is_made_absolute_and_an_empty_one_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = config.load({"DATA_DIR": " classroom ", "STORAGE_ROOT": "~/efs"})
    assert cfg.DATA_DIR == str(tmp_path / "classroom") and cfg.STORAGE_ROOT == str(tmp_path / "home" / "efs")
    assert "expected a folder path" in refusal({"DATA_DIR": "  "})


def test_but_changes_only_what_it_names_and_leaves_the_original():
    cfg = config.load({"RUN_CPU_SECONDS": "10"})
    shorter = cfg.but(RUN_CPU_SECONDS=2)
    assert shorter.RUN_CPU_SECONDS == 2 and cfg.RUN_CPU_SECONDS == 10
    assert shorter.RUN_MEMORY_MB == cfg.RUN_MEMORY_MB


def test_process_count_is_one_per_cpu_when_zero(monkeypatch):
    monkeypatch.setattr(config.os, "cpu_count", lambda: 6)
    assert config.load({"TORNADO_PROCESSES": "0"}).process_count == 6
    assert config.load({"TORNADO_PROCESSES": "3"}).process_count == 3


@given(name=st.sampled_from([s.name for s in config.SETTINGS if s.name not in ("DATA_DIR", "STORAGE_ROOT")]),
       text=st.text(max_size=40))
def test_any_text_is_taken_or_refused_in_one_line_naming_the_setting(name, text):
    try:
        config.load({name: text})
    except config.ConfigError as e:
        said = str(e)
        assert said.startswith(f"{name}=") and " is not valid: expected " in said and "\n" not in said
        if name in ("COOKIE_SECRET", "RUNNER_SECRET"):
            assert said.startswith(f"{name}='********'")


def test_the_settings_table_has_a_row_per_setting_with_its_allowed_values():
    rows = config.markdown_table().splitlines()[2:]
    assert len(rows) == len(config.SETTINGS)
    for row, s in zip(rows, config.SETTINGS):
        assert row.startswith(f"| `{s.name}` |") and f"`{s.parse.allowed.replace('|', chr(92) + '|')}`" in row
