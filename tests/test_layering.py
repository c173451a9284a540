"""The shape of server/ as read from its source: no import cycle between
its packages (TYPE_CHECKING imports count), the files service is used by
its named methods only, and every operation a file process makes is one
of the store's."""
import ast
import pathlib
import re

from server.files.child.protocol import OPERATIONS, Op
from server.files.service import Files
from server.files.store import Store

SERVER = pathlib.Path(__file__).resolve().parent.parent / "server"
BANNED = re.compile(r"\bfiles\.(run|store|processes)\b(?! import)|\bctx\.(store|file_processes)\b")
PACKAGES = {p.name for p in SERVER.iterdir() if (p / "__init__.py").exists()}


def _modules():
    for path in SERVER.rglob("*.py"):
        rel = path.relative_to(SERVER).parts
        if rel[0] in PACKAGES:
            yield path, rel


def import_graph():
    """{package: {packages it imports}} for the packages of server/."""
    graph = {}
    for path, rel in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == len(rel):  # from ..X (server/ itself)
                targets = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("server."):
                targets = [node.module.split(".")[1]]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names if a.name.startswith("server.")]
            graph.setdefault(rel[0], set()).update(t for t in targets if t in PACKAGES and t != rel[0])
    return graph


def cycles(graph):
    found = []

    def walk(node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                found.append(path + [nxt])
            elif nxt not in path and nxt > path[0]:  # each cycle once, from its least package
                walk(nxt, path + [nxt])
    for start in sorted(graph):
        walk(start, [start])
    return found


def test_no_import_cycle_between_packages():
    graph = import_graph()
    assert graph["files"] and graph["teaching"]  # the graph was read
    assert cycles(graph) == []
    assert "teaching" not in graph["files"] and "runs" not in graph["files"]
    assert "teaching" not in graph["accounts"] and "teaching" not in graph["runs"]  # runs tell teaching through RunEvents


def test_the_files_service_is_called_by_its_named_methods_only():
    """Outside server/files/, nobody picks the store's methods or places a call."""
    for path, rel in _modules():
        if rel[0] == "files":
            continue
        text = path.read_text(encoding="utf-8")
        assert not BANNED.search(text), f"{path}: {BANNED.search(text).group()}"
    assert not hasattr(Files, "run")


def test_every_file_operation_is_a_store_method():
    assert set(OPERATIONS) == set(Op)
    for op, fn in OPERATIONS.items():
        assert getattr(Store, fn.__name__) is fn, op


def test_classes_are_what_files_needs_of_them():
    """teaching's Classes implements the Membership files declares."""
    import inspect

    from server.files.service import Membership
    from server.teaching.classes import Classes
    needed = [n for n, f in vars(Membership).items() if inspect.iscoroutinefunction(f)]
    assert needed == ["area", "may_read_home"]
    for name in needed:
        assert inspect.iscoroutinefunction(getattr(Classes, name))
        assert inspect.signature(getattr(Classes, name)).parameters.keys() == \
            inspect.signature(getattr(Membership, name)).parameters.keys()
