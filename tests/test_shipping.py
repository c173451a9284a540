"""Bringing a runner's copy of a home in step with the home before a run
(server/runs/shipping.py), with the files service and the copy as small
fakes: what is sent, what is deleted, and what is left alone."""
import asyncio
import base64

from server.runs import shipping

MAX_FILE = 1 << 20


class Files:
    """A home as the files service lists and reads it."""

    def __init__(self, files, truncated=False):
        self.files = files  # path -> (bytes, modified)
        self.truncated = truncated
        self.read_paths = []

    async def tree(self, username, area, parts):
        entries = [{"path": path, "kind": "file", "size": len(data), "modified": modified}
                   for path, (data, modified) in self.files.items()]
        return entries, self.truncated

    async def read(self, username, area, parts, limit=None):
        path = "/".join(parts)
        self.read_paths.append(path)
        data, modified = self.files[path]
        return data, f"etag-{path}-{modified}", {"size": len(data), "modified": modified}


class Copy:
    """A runner's copy: what the web tier knows it holds, and the puts it is sent."""

    def __init__(self, held):
        self.held = dict(held)
        self.puts = []

    async def adopt(self):
        pass

    async def put(self, files, deleted, clear=False):
        self.puts.append((files, deleted))


def sent(copy):
    """{path: bytes} of every file put, and the paths deleted."""
    files, deleted = {}, []
    for pieces, gone in copy.puts:
        for piece in pieces:
            files[piece["path"]] = files.get(piece["path"], b"") + base64.b64decode(piece["data"])
        deleted += gone
    return files, deleted


def test_only_what_changed_is_sent_and_what_the_home_no_longer_has_is_deleted():
    home = Files({"same.py": (b"same", 1.0), "changed.py": (b"new text", 3.0), "new.py": (b"new", 4.0)})
    copy = Copy({"same.py": (4, 1.0, "e1"), "changed.py": (8, 2.0, "e2"), "gone.py": (3, 1.0, "e3")})
    asyncio.run(shipping.send(home, "ada", copy, MAX_FILE))
    files, deleted = sent(copy)
    assert files == {"changed.py": b"new text", "new.py": b"new"} and deleted == ["gone.py"]
    assert home.read_paths == ["changed.py", "new.py"]
    assert set(copy.held) == {"same.py", "changed.py", "new.py"}


def test_a_tree_cut_short_deletes_nothing_from_the_copy():
    # A home of more entries than a tree lists: what it left out may still be there.
    home = Files({"listed.py": (b"changed", 5.0)}, truncated=True)
    copy = Copy({"listed.py": (3, 1.0, "e1"), "beyond.py": (6, 1.0, "e2")})
    asyncio.run(shipping.send(home, "ada", copy, MAX_FILE))
    files, deleted = sent(copy)
    assert files == {"listed.py": b"changed"} and deleted == []
    assert "beyond.py" in copy.held


def test_a_tree_listed_with_the_runnable_check_is_used_as_it_is():
    home = Files({"main.py": (b"print(1)", 1.0)})
    copy = Copy({})
    tree = ([{"path": "main.py", "kind": "file", "size": 8, "modified": 1.0},
             {"path": "notes", "kind": "folder", "size": 0, "modified": 1.0}], False)
    asyncio.run(shipping.send(home, "ada", copy, MAX_FILE, tree))
    assert sent(copy) == ({"main.py": b"print(1)"}, [])
