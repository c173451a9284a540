"""What an attempt's run of a program printed, told apart: its output, the
prompts its input() calls printed, and where it waited for a line.

An output check compares the output, and the prompts too only when the
teacher asks for "exact" (testing.py); the student sees all of it, with
the lines of the check's input where the program read them (an attempt's
terminal does not echo them), the prompts and those lines greyed. The
run (runs/run.py) says which text was a prompt: each `input` message
repeats its prompt, which is then the end of the output received. A
program can print input()'s marks itself and so call any of its output a
prompt: all it gains is that text left out of the comparison, as if it
had not printed it.
"""
from typing import Any

OUTPUT, PROMPT, TYPED = "output", "prompt", "typed"
MAX_PIECES = 10000  # past this many prompts and waits, a prompt stays output (and no typed line is shown)


class Transcript:
    """One run's stdout as it arrives: at most `limit` characters of text kept."""

    def __init__(self, limit: int):
        self.limit = limit
        self.size = 0
        self._pieces: list[list[Any]] = []  # [kind, text], adjacent output joined; a wait is [TYPED, None]

    def output(self, text: str) -> None:
        text = text[:self.limit - self.size]
        if not text:
            return
        self.size += len(text)
        if self._pieces and self._pieces[-1][0] == OUTPUT:
            self._pieces[-1][1] += text
        else:
            self._pieces.append([OUTPUT, text])

    def waits(self, prompt: str = "") -> None:
        """The program waits in input() after printing `prompt` (what the
        run saw between its marks): that end of the output is a prompt."""
        if len(self._pieces) >= MAX_PIECES:
            return
        last = self._pieces[-1] if self._pieces else None
        if prompt and last is not None and last[0] == OUTPUT and last[1].endswith(prompt):
            last[1] = last[1][:-len(prompt)]
            if not last[1]:
                self._pieces.pop()
            self._pieces.append([PROMPT, prompt])
        self._pieces.append([TYPED, None])

    def text(self) -> str:
        """Everything printed, prompts included, as a terminal without echo shows it."""
        return "".join(text for kind, text in self._pieces if kind != TYPED).replace("\r\n", "\n")

    def pieces(self, typed: str) -> list[list[str]]:
        """[[kind, text]] in order, each wait given the next line of
        `typed` (the check's input); waits past its last line left out."""
        lines = typed.split("\n")
        lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        out: list[list[str]] = []
        given = 0
        for kind, text in self._pieces:
            if kind == TYPED:
                if given == len(lines):
                    continue
                text, given = lines[given], given + 1
            if out and out[-1][0] == kind:
                out[-1][1] += text
            else:
                out.append([kind, text])
        return [[kind, text.replace("\r\n", "\n")] for kind, text in out]


def shown(value: object) -> list[list[str]] | None:
    """A transcript as the checker sent it back, if it is one."""
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and p[0] in (OUTPUT, PROMPT, TYPED) and isinstance(p[1], str)
            for p in value):
        return None
    return value
