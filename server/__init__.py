"""PyClassroom: a browser IDE for Python classes, served by Tornado."""
__version__ = "0.1.0"
