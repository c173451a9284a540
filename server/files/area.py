"""Areas: the trees of files that one lock and one quota cover."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Area:
    key: str          # 'home/ada' or 'course'
    parts: tuple      # folders below STORAGE_ROOT
    quota: bool       # homes have quotas; the course area does not

    @staticmethod
    def home(username):
        return Area("home/" + username, ("home", username), True)

    @staticmethod
    def course():
        return Area("course", ("course",), False)

    @property
    def slug(self):
        """The key as one file name, for the store's own records of the area."""
        return self.key.replace("/", "--")
