"""The Python modules beside a file, for editing help (assist/service.py):
their names, and the text of those the edited text imports. Blocking (it
reads through the store): the files service (service.py,
`Files.python_modules`) runs it in a file thread."""
import re

from ..errors import Refused
from .area import Area
from .paths import Parts
from .store import Store, as_text

MODULE_BYTES = 128 << 10  # a larger module beside the file is left out
MODULES_READ = 16  # modules read per request, following imports
MODULES_LISTED = 200  # module names offered for `import` from the file's folder
MODULE_FILE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.py")
IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)|import[ \t]+([^#;\n]+))", re.M)


def imported(text: str) -> set[str]:
    """The top-level module names `text` imports (absolute imports only)."""
    names: set[str] = set()
    for m in IMPORT_LINE.finditer(text):
        if m.group(1):
            names.add(m.group(1))
            continue
        for part in m.group(2).split(","):
            word = part.strip().split(".")[0].split(" ")[0]
            if word.isidentifier():
                names.add(word)
    return names


def modules(store: Store, area: Area, folder: Parts, edited: str, source: str) -> dict[str, str]:
    """{file name: text} of the modules beside the edited file: the text of
    those it imports (and those import, up to MODULES_READ), empty for the
    others, so that `import he` completes their names. Blocking."""
    try:
        entries = store.list(area, folder)
    except Refused:
        return {}
    names = sorted(e["name"] for e in entries
                   if e["kind"] == "file" and MODULE_FILE.fullmatch(e["name"]) and e["name"] != edited)
    files = dict.fromkeys(names[:MODULES_LISTED], "")
    todo, seen = imported(source), set[str]()
    while todo and len(seen) < MODULES_READ:
        name = todo.pop() + ".py"
        if name in seen or name not in files:
            continue
        seen.add(name)
        try:
            data, _, _ = store.read(area, folder + (name,), MODULE_BYTES)
        except Refused:  # a link, a FIFO, gone: not read
            continue
        text = as_text(data) if data is not None else None
        if text:
            files[name] = text
            todo |= imported(text) - {n[:-3] for n in seen}
    return files
