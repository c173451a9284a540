"""Typing into a file as the IDE's recorder reports it (static/src/recorder.js,
server/replay/): CodeMirror's changes in their JSON form, for the tests and
bench_exam. Lengths count UTF-16 units, as the editor does.

    typist = Typist()
    typist.type("print(1)\\n"); typist.paste("x = 2\\n")
    await rc.send(type="edits", **typist.message("home", "main.py"))
"""
import time


def utf16(text):
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def changes_json(length, at, removed, inserted):
    """The change that removes `removed` units at `at` of a text `length` long and inserts `inserted`."""
    parts = [at] if at else []
    parts.append([removed, *inserted.split("\n")] if inserted else [removed])
    if length - at - removed:
        parts.append(length - at - removed)
    return parts


def apply(text, changes):
    """`text` after one change in CodeMirror's JSON form (ASCII text: units are characters)."""
    out, pos = [], 0
    for part in changes:
        if isinstance(part, int):
            out.append(text[pos:pos + part])
            pos += part
        else:
            pos += part[0]
            out.append("\n".join(part[1:]))
    assert pos == len(text), "a change must cover the whole text"
    return "".join(out)


class Typist:
    def __init__(self, text=""):
        self.text = text
        self.start = text  # the text before the held edits
        self.held = []
        self.based = False  # whether the server has the stream's text already

    def _edit(self, at, removed, inserted, flag):
        """Replace `removed` characters at `at` with `inserted` (positions in characters, sent in units)."""
        changes = changes_json(utf16(self.text), utf16(self.text[:at]), utf16(self.text[at:at + removed]), inserted)
        self.held.append([round(time.monotonic() * 1000), changes, flag])
        self.text = self.text[:at] + inserted + self.text[at + removed:]

    def type(self, text):
        """Each character typed at the end, one edit each."""
        for char in text:
            self._edit(len(self.text), 0, char, "")

    def paste(self, text):
        self._edit(len(self.text), 0, text, "p")

    def delete(self, count):
        """Backspace `count` times at the end."""
        for _ in range(min(count, len(self.text))):
            self._edit(len(self.text) - 1, 1, "", "")

    def message(self, area, path):
        """The `edits` message of what was typed since the last (its fields, without type and id)."""
        fields = {"area": area, "path": path, "length": utf16(self.start), "sent": round(time.monotonic() * 1000),
                  "edits": self.held}
        if not self.based:
            fields["base"] = self.start
            self.based = True
        self.held, self.start = [], self.text
        return fields
