"""Client paths (server/files/paths.py) without a server: what `parse`
refuses and why, that it refuses nothing else than with BadPath, and that
the folder walk never crosses a link nor blocks on a FIFO."""
import os

import pytest
from hypothesis import given, strategies as st

from server.files import paths
from server.files.paths import BadPath


@pytest.mark.parametrize("path, parts", [
    ("", ()),
    ("hello.py", ("hello.py",)),
    ("lesson1/hello.py", ("lesson1", "hello.py")),
    ("lesson1/", ("lesson1",)),
    ("a b/c d.py", ("a b", "c d.py")),
    ("données/été.py", ("données", "été.py")),
    ("..x/x..", ("..x", "x..")),
    (".hidden", (".hidden",)),
    ("/".join(["d"] * paths.MAX_DEPTH), ("d",) * paths.MAX_DEPTH),
    ("x" * paths.MAX_NAME_BYTES, ("x" * paths.MAX_NAME_BYTES,)),
])
def test_a_plain_path_becomes_its_names(path, parts):
    assert paths.parse(path) == parts


@pytest.mark.parametrize("path, code", [
    (b"a.py", "bad_path"),
    (None, "bad_path"),
    ("a\x00.py", "bad_character"),
    ("/etc/passwd", "absolute_path"),
    ("../other/a.py", "path_segment"),
    ("a/../../b", "path_segment"),
    ("a/./b", "path_segment"),
    ("a//b", "path_segment"),
    ("a\\b.py", "bad_character"),
    ("a\nb.py", "bad_character"),
    ("tab\there", "bad_character"),
    ("del\x7f", "bad_character"),
    ("evil\u202etxt.py", "bad_character"),  # right-to-left override
    ("zero\u200bwidth.py", "bad_character"),
    ("line\u2028sep", "bad_character"),
    ("private\ue000", "bad_character"),
    ("\ufe52\ufe52", "path_segment"),  # small full stops fold to ".."
    ("a\uff0fb", "path_segment"),  # a full-width solidus folds to "/"
    (" lead.py", "bad_character"),
    ("trail.py ", "bad_character"),
    (".~pyc-save", "reserved_name"),
    ("x" * (paths.MAX_NAME_BYTES + 1), "name_too_long"),
    ("é" * (paths.MAX_NAME_BYTES // 2 + 1), "name_too_long"),  # counted in UTF-8 bytes
    ("/".join(["d"] * (paths.MAX_DEPTH + 1)), "path_too_long"),
    ("/".join(["x" * 200] * 6), "path_too_long"),
])
def test_a_path_that_could_escape_or_deceive_is_refused_with_its_reason(path, code):
    with pytest.raises(BadPath) as refused:
        paths.parse(path)
    assert refused.value.code == code and refused.value.status == 400


def test_the_root_may_be_refused_where_a_file_is_needed():
    assert paths.parse("", allow_root=True) == ()
    with pytest.raises(BadPath, match="name a file or folder"):
        paths.parse("", allow_root=False)


@given(st.text(max_size=300))
def test_any_text_is_names_that_rejoin_to_it_or_a_bad_path(text):
    try:
        parts = paths.parse(text)
    except BadPath as e:
        assert e.code in {"bad_path", "bad_character", "absolute_path", "path_too_long", "path_segment",
                          "name_too_long", "reserved_name"}
        return
    assert "/".join(parts) == text.removesuffix("/")
    assert all(paths.name_problem(name) is None and name not in (".", "..") for name in parts)


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20), max_size=5))
def test_names_that_each_pass_make_a_path_that_passes(names):
    if all(paths.name_problem(n) is None for n in names):
        assert paths.parse("/".join(names)) == tuple(names)


def test_a_name_not_in_utf8_is_shown_escaped_and_is_not_plain():
    odd = os.fsdecode(b"caf\xe9.py")
    assert paths.shown(odd) == "caf\\xe9.py"
    assert not paths.is_plain(odd)
    assert paths.is_plain("café.py") and not paths.is_plain(".~pyc-tmp")


def test_the_walk_refuses_a_link_anywhere_in_the_path(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "home" / "real").mkdir(parents=True)
    (tmp_path / "home" / "sneaky").symlink_to(tmp_path / "outside")
    root = paths.open_root(str(tmp_path / "home"))
    try:
        with paths.opened(root, ("real",)) as fd:
            assert os.listdir(fd) == []
        for parts in (("sneaky",), ("sneaky", "deeper")):
            with pytest.raises(BadPath) as refused:
                paths.open_dir(root, parts, create=True)
            assert refused.value.code == "not_a_folder"
        assert not (tmp_path / "outside" / "deeper").exists()
    finally:
        os.close(root)


def test_the_walk_makes_missing_folders_only_when_asked(tmp_path):
    root = paths.open_root(str(tmp_path))
    try:
        with pytest.raises(FileNotFoundError):
            paths.open_dir(root, ("a", "b"))
        with paths.opened(root, ["a", "b"], create=True):
            pass
        assert (tmp_path / "a" / "b").is_dir()
    finally:
        os.close(root)


def test_a_file_that_is_a_link_is_refused_not_followed(tmp_path):
    (tmp_path / "secret").write_text("answers")
    (tmp_path / "link.py").symlink_to(tmp_path / "secret")
    root = paths.open_root(str(tmp_path))
    try:
        with pytest.raises(BadPath) as refused:
            paths.open_file(root, "link.py")
        assert refused.value.code == "symlink"
        assert paths.exists(root, "link.py") and not paths.exists(root, "nothing.py")
    finally:
        os.close(root)


def test_a_fifo_or_a_folder_where_a_file_was_expected_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")  # no writer: a blocking open would wait forever
    (tmp_path / "folder.py").mkdir()
    root = paths.open_root(str(tmp_path))
    try:
        for name in ("pipe.py", "folder.py"):
            with pytest.raises(paths.NotAFile) as refused:
                paths.read_regular(root, name)
            assert refused.value.code == "not_a_file" and f"'{name}' is not a file" in str(refused.value.message)
    finally:
        os.close(root)


def test_a_regular_file_is_read_whole_or_not_at_all_past_the_limit(tmp_path):
    (tmp_path / "big.py").write_bytes(b"x" * 70000)
    root = paths.open_root(str(tmp_path))
    try:
        content, st_ = paths.read_regular(root, "big.py")
        assert content == b"x" * 70000 and st_.st_size == 70000
        content, st_ = paths.read_regular(root, "big.py", limit=69999)
        assert content is None and st_.st_size == 70000
    finally:
        os.close(root)
