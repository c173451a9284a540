"""Walking a folder tree that a student's program may have built to hurt us.

A program can nest folders thousands deep, put a million names in one
folder, plant FIFOs and links, and move folders while we walk. So the walk
keeps an explicit stack (no recursion on Python's stack), holds only the
folder it is in open (the process's open files do not grow with depth),
never follows a link, and climbs back up with "..", making sure that it lands
in the very folder it came down from: if a program moved a folder meanwhile
the walk stops with `Changed` rather than wander elsewhere. `max_depth` and
`max_entries` bound what a caller may meet, with errors that say so.

    for event, dir_fd, name, st in (w := Walk(fd)):
        ...  # dir_fd is valid until the next step; w.path(name) is the path

Events: ENTER a folder (before what is in it; `w.prune()` skips its
content), FILE anything else (files, FIFOs, links...), LEAVE a folder
(after its content, with `dir_fd` its parent again, so it can be removed).
"""
import errno
import os
import stat
from typing import Callable, Iterator

from ..errors import Refused
from .paths import DIR_FLAGS, shown

ENTER, FILE, LEAVE = "enter", "file", "leave"
# (event, the folder's fd, the name in it, its stat: None on LEAVE)
Step = tuple[str, int, str, "os.stat_result | None"]


class TooDeep(Refused):
    def __init__(self, path: str, limit: int) -> None:
        super().__init__(409, "too_deep", f"'{shown(path)}' holds folders nested more than {limit} deep. "
                                          "Delete it (or move what you need out of it) first.")


class TooMany(Refused):
    def __init__(self, limit: int) -> None:
        super().__init__(409, "too_many_files", f"This folder holds more than {limit} files and folders. "
                                                "Delete some, or choose a smaller folder.")


class Changed(Refused):
    def __init__(self) -> None:
        super().__init__(409, "folder_changed", "The folder changed while it was being read "
                                                "(a running program?). Try again.")


class _Level:
    __slots__ = ("ident", "todo", "name")

    def __init__(self, st: os.stat_result, todo: list[str], name: str) -> None:
        self.ident, self.todo, self.name = (st.st_dev, st.st_ino), todo, name


class Walk:
    """One walk of the tree below `top_fd` (not closed by the walk).

    max_depth: entries deeper than this many levels below the top are too
    deep: TooDeep is raised, or with `skip_deep` the folder holding them
    is not entered and `truncated` is set. max_entries: TooMany once more
    entries than this have been met. skip(name): names left out (and not
    counted), e.g. the store's own temporary files."""

    def __init__(self, top_fd: int, max_depth: int | None = None, max_entries: int | None = None,
             skip_deep: bool = False, skip: Callable[[str], bool] | None = None) -> None:
        self.top_fd, self.max_depth, self.max_entries = top_fd, max_depth, max_entries
        self.skip_deep, self.skip = skip_deep, skip
        self.truncated = False
        self.count = 0
        self._stack: list[_Level] = []
        self._pruned = False

    @property
    def depth(self) -> int:
        """How deep the entries of the current folder are (1: in the top)."""
        return len(self._stack)

    def path(self, name: str) -> str:
        """'a/b/name' for `name` in the current folder, relative to the top."""
        return "/".join([level.name for level in self._stack[1:]] + [name])

    def prune(self) -> None:
        """Do not go into the folder just ENTERed."""
        self._pruned = True

    def __iter__(self) -> Iterator[Step]:
        cur = os.dup(self.top_fd)
        try:
            self._stack = [_Level(os.fstat(cur), self._names(cur), "")]  # the top: no name
            while True:
                level = self._stack[-1]
                if level.todo:
                    name = level.todo.pop()
                    try:
                        st = os.stat(name, dir_fd=cur, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed meanwhile
                    self._counted()
                    if not stat.S_ISDIR(st.st_mode):
                        yield FILE, cur, name, st
                        continue
                    self._pruned = False
                    yield ENTER, cur, name, st
                    if not self._pruned:
                        cur = self._descend(cur, name, st)
                elif len(self._stack) > 1:
                    cur = self._climb(cur)
                    yield LEAVE, cur, level.name, None
                else:
                    return
        finally:
            os.close(cur)

    # -- steps -------------------------------------------------------------

    def _counted(self) -> None:
        self.count += 1
        if self.max_entries is not None and self.count > self.max_entries:
            raise TooMany(self.max_entries)

    def _names(self, fd: int) -> list[str]:
        """The names in folder `fd`, to be popped in sorted order, bounded by
        what max_entries still allows (a folder of a million names must not
        cost a million strings first)."""
        budget = None if self.max_entries is None else self.max_entries - self.count
        names: list[str] = []
        with os.scandir(fd) as entries:
            for entry in entries:
                if self.skip and self.skip(entry.name):
                    continue
                if budget is not None and len(names) >= budget:
                    raise TooMany(self.count + budget)  # max_entries
                names.append(entry.name)
        names.sort(reverse=True)
        return names

    def _descend(self, cur: int, name: str, st: os.stat_result) -> int:
        try:
            child = os.open(name, DIR_FLAGS, dir_fd=cur)
        except (FileNotFoundError, NotADirectoryError):
            return cur  # removed or replaced meanwhile: nothing to walk
        except OSError as e:
            if e.errno == errno.ELOOP:  # swapped for a link meanwhile
                return cur
            raise
        try:
            now = os.fstat(child)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                os.close(child)  # swapped meanwhile; what is there now is not what was met
                return cur
            names = self._names(child)
            if names and self.max_depth is not None and len(self._stack) >= self.max_depth:
                if not self.skip_deep:
                    raise TooDeep(self.path(name), self.max_depth)
                self.truncated = True
                os.close(child)
                return cur
        except BaseException:
            os.close(child)
            raise
        self._stack.append(_Level(now, names, name))
        os.close(cur)
        return child

    def _climb(self, cur: int) -> int:
        parent = os.open("..", DIR_FLAGS, dir_fd=cur)
        st = os.fstat(parent)
        self._stack.pop()
        if (st.st_dev, st.st_ino) != self._stack[-1].ident:
            os.close(parent)
            raise Changed()
        os.close(cur)
        return parent


def remove_tree(path: str) -> None:
    """Remove the folder `path` and everything below it, however deep,
    never following a link: for a sandbox's throwaway folder, once its
    programs are gone (nothing may race the removal)."""
    parent, name = os.path.split(os.path.abspath(path))
    parent_fd = os.open(parent, DIR_FLAGS)
    try:
        remove_at(parent_fd, name)
    finally:
        os.close(parent_fd)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove whatever `name` in `dir_fd` is (a folder with all below it,
    as remove_tree); nothing there is nothing to do."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    top = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        for event, cur, entry, _ in Walk(top):
            if event == LEAVE:
                os.rmdir(entry, dir_fd=cur)
            elif event == FILE:
                os.unlink(entry, dir_fd=cur)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=dir_fd)
