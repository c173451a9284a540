"""Exams (issue 33): a timed test of a class's exercises, in a folder per student that locks at their end (service.py)."""
