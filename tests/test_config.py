"""Settings: bad values stop start-up with one clear line; --help and
--print-config tell an operator what is in force."""
import dataclasses
import os
import re
import subprocess
import sys
import typing

import pytest

from server import config, public_url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_server(*args, **env):
    full_env = {k: v for k, v in os.environ.items() if k not in {s.name for s in config.SETTINGS}}
    full_env.update(env)
    return subprocess.run([sys.executable, "-m", "server", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name,value,allowed", [
    ("TORNADO_PROCESSES", "abc", "whole number from 0 to 256"),
    ("TORNADO_PROCESSES", "-3", "whole number from 0 to 256"),
    ("PORT", "70000", "whole number from 0 to 65535"),
    ("LOG_LEVEL", "LOUD", "one of DEBUG, INFO, WARNING, ERROR"),
    ("DATABASE_URL", "mysql://x", "postgresql://"),
    ("DEMO", "maybe", "1/0"),
    ("PUBLIC_URL", "127.0.0.1:8888", "http://10.0.0.5:8888"),  # no scheme
    ("PUBLIC_URL", "http://admin:pw@school.lan", "http or https, a host"),
])
def test_bad_value_stops_startup_with_one_clear_line(name, value, allowed, tmp_path):
    result = run_server(**{name: value, "DATA_DIR": str(tmp_path)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert name in lines[0] and repr(value) in lines[0] and allowed in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert not os.listdir(tmp_path), "a refused start must not create anything"


def test_help_lists_every_setting_with_its_default():
    result = run_server("--help")
    assert result.returncode == 0
    for s in config.SETTINGS:
        assert s.name in result.stdout
    assert "default 8888" in result.stdout
    assert "default 1;" in result.stdout  # TORNADO_PROCESSES


def test_print_config_masks_secrets():
    result = run_server("--print-config", DATABASE_URL="postgresql://app:hunter2-secret@db:5432/pyc",
                        COOKIE_SECRET="s" * 40, ADMIN_PASSWORD="admin-secret-pw", TORNADO_PROCESSES="0")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "hunter2-secret" not in out and "s" * 40 not in out and "admin-secret-pw" not in out
    assert "DATABASE_URL=postgresql://app:********@db:5432/pyc" in out
    assert "COOKIE_SECRET=********" in out
    assert "TORNADO_PROCESSES=0" in out
    assert "PORT=8888" in out


def test_defaults_and_derived_values(tmp_path):
    cfg = config.load({"DATA_DIR": str(tmp_path)})
    assert cfg.PORT == 8888 and cfg.TORNADO_PROCESSES == 1 and cfg.process_count == 1
    assert cfg.STORAGE_ROOT == os.path.join(str(tmp_path), "storage")
    assert config.load({"TORNADO_PROCESSES": "0"}).process_count == os.cpu_count()


def test_short_cookie_secret_is_refused():
    with pytest.raises(config.ConfigError, match="COOKIE_SECRET='\\*+' is not valid: expected at least 32"):
        config.load({"COOKIE_SECRET": "short"})


def test_every_setting_is_explained_in_the_written_docs():
    """People read the docs, not config.py: a setting that no hand-written
    page (README.md, docs/*.md) names is one nobody can find (four had gone
    missing). docs/settings.md does not count: it is generated from
    config.py, so it names every setting whether or not anyone explains it."""
    pages = [os.path.join(ROOT, "README.md")] + [
        os.path.join(ROOT, "docs", name) for name in sorted(os.listdir(os.path.join(ROOT, "docs")))
        if name.endswith(".md") and name != "settings.md"]
    docs = "".join(open(page, encoding="utf-8").read() for page in pages)
    missing = [s.name for s in config.SETTINGS if not re.search(rf"\b{s.name}\b", docs)]
    assert not missing, f"settings no page of the docs names (explain each where its subject is): {missing}"


def test_the_settings_reference_is_the_one_the_code_generates():
    """docs/settings.md holds config.markdown_table() as it is now (as
    Datasette's docs test does): regenerate it with
    `python -m server --settings-markdown`."""
    text = open(os.path.join(ROOT, "docs", "settings.md"), encoding="utf-8").read()
    table = text[text.index("| setting | default | allowed |"):]
    assert table == config.markdown_table(), "docs/settings.md is out of date: regenerate its table"
    out = run_server("--settings-markdown")
    assert out.returncode == 0 and out.stdout == config.markdown_table(), out.stderr


def test_config_has_one_field_per_setting_typed_as_its_parser_returns():
    """SETTINGS is the only table: a row without a field (or a field without
    a row, derived ones aside) would be a setting nobody can read or one no
    operator can set, and a field typed otherwise than its parser returns
    would lie to mypy."""
    hints = typing.get_type_hints(config.Config)
    fields = {f.name for f in dataclasses.fields(config.Config) if not f.metadata.get("derived")}
    names = [s.name for s in config.SETTINGS]
    assert len(names) == len(set(names)), "a setting is in the table twice"
    assert sorted(set(names) - fields) == [], "settings with no field in Config"
    assert sorted(fields - set(names)) == [], "fields of Config with no setting in the table"
    for s in config.SETTINGS:
        value = s.parse(s.default)
        hint = typing.get_origin(hints[s.name]) or hints[s.name]  # tuple[...] is a tuple
        assert type(value) is hint, f"{s.name}: the field says {hints[s.name]}, its parser gives {value!r}"


def test_config_is_frozen_and_but_makes_a_changed_copy(tmp_path):
    cfg = config.load({"DATA_DIR": str(tmp_path)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.RUN_WALL_SECONDS = 1
    shorter = cfg.but(RUN_WALL_SECONDS=30)
    assert (shorter.RUN_WALL_SECONDS, cfg.RUN_WALL_SECONDS) == (30, 900)
    assert shorter.STORAGE_ROOT == cfg.STORAGE_ROOT
    with pytest.raises(TypeError):
        cfg.but(NO_SUCH_SETTING=1)


def test_public_url_resolve_says_whether_it_guessed(tmp_path):
    given = public_url.resolve(config.load({"PUBLIC_URL": "http://py.school.lan:8888"}), 8888)
    assert (given.PUBLIC_URL, given.PUBLIC_URL_GUESSED) == ("http://py.school.lan:8888", False)
    guessed = public_url.resolve(config.load({"HOST": "127.0.0.1"}), 8123)
    assert guessed.PUBLIC_URL == "http://127.0.0.1:8123" and guessed.PUBLIC_URL_GUESSED
