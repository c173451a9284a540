"""Can another user reach a folder? Both the embedded PostgreSQL (as
`postgres`) and the sandboxes (as each student's uid) must walk from `/`
down to their folder, which a 0700 folder on the way forbids."""
import os


def blocked_parent(path: str, uid: int) -> str | None:
    """The first folder above `path` (or `path` itself) that `uid` may not
    enter, or None."""
    path = os.path.abspath(path)
    chain = []
    while True:
        chain.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(chain):
        st = os.stat(folder)
        if st.st_uid == uid:
            if not st.st_mode & 0o100:
                return folder
        elif not st.st_mode & 0o001:
            return folder
    return None
