"""What is open here per key: a teacher's class-view sockets per class
(teaching/live.py), a teacher's follows per student (teaching/following.py),
a user's open IDEs' inboxes (inbox.py). A key is present exactly while
something is registered under it, so `key in registry` says whether anyone
here wants to hear of it."""
from collections import defaultdict


class Registry(defaultdict):
    """key -> the set of things registered under it (`registry[key].add(thing)`)."""

    def __init__(self):
        super().__init__(set)

    def discard(self, key, thing) -> None:
        """Take `thing` out; the key goes with the last thing under it."""
        found = self.get(key)
        if found is not None:
            found.discard(thing)
            if not found:
                del self[key]

    def everything(self) -> list:
        """Every thing registered, under any key."""
        return [thing for things in self.values() for thing in things]
