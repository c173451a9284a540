"""What crosses a file process's socket, for the worker (processes.py) and
the process (__main__.py) alike: each message is a pickle behind its
length; a call is (Op, args), its answer (True, result) or (False, the
exception raised).

A call names its operation by an `Op`, and the process makes only the
operations in OPERATIONS: no name sent over the socket is looked up on the
store, so a caller can reach nothing else of it."""
import enum
import pickle

from ..store import Store


class Op(enum.Enum):
    ENSURE_HOME = enum.auto()
    ENSURE_AREA = enum.auto()
    IS_DIR = enum.auto()
    LIST = enum.auto()
    TREE = enum.auto()
    READ = enum.auto()
    SAVE = enum.auto()
    MKDIR = enum.auto()
    MOVE = enum.auto()
    DELETE = enum.auto()
    HISTORY = enum.auto()
    READ_VERSION = enum.auto()
    RESTORE = enum.auto()
    TRASH_LIST = enum.auto()
    TRASH_RESTORE = enum.auto()
    RUNNABLE_SIZE = enum.auto()
    RUNNABLE_LISTED = enum.auto()
    QUOTA_PROBLEM = enum.auto()
    MEASURE = enum.auto()
    COURSE_COPY = enum.auto()


# What a file process does for each operation: a store's method, given the store.
OPERATIONS = {
    Op.ENSURE_HOME: Store.ensure_home,
    Op.ENSURE_AREA: Store.ensure_area,
    Op.IS_DIR: Store.is_dir,
    Op.LIST: Store.list,
    Op.TREE: Store.tree,
    Op.READ: Store.read,
    Op.SAVE: Store.save,
    Op.MKDIR: Store.mkdir,
    Op.MOVE: Store.move,
    Op.DELETE: Store.delete,
    Op.HISTORY: Store.history,
    Op.READ_VERSION: Store.read_version,
    Op.RESTORE: Store.restore,
    Op.TRASH_LIST: Store.trash_list,
    Op.TRASH_RESTORE: Store.trash_restore,
    Op.RUNNABLE_SIZE: Store.runnable_size,
    Op.RUNNABLE_LISTED: Store.runnable_listed,
    Op.QUOTA_PROBLEM: Store.quota_problem,
    Op.MEASURE: Store.measure,
    Op.COURSE_COPY: Store.course_copy,
}


class NoSuchOperation(AttributeError):
    """A call whose operation is not in OPERATIONS: a bug in the worker,
    answered as the call's error; the process goes on."""


def operation(op):
    """What the process does for `op`, or NoSuchOperation."""
    if not isinstance(op, Op) or op not in OPERATIONS:
        raise NoSuchOperation(f"a file process has no operation {op!r}")
    return OPERATIONS[op]


def frame(obj: object) -> bytes:
    """A message: its pickle's length (4 bytes), then the pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(4, "big") + data


def read_exactly(sock, size):
    """`size` bytes from a blocking socket; None when it closed first."""
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            return None
        got += n
    return buf
