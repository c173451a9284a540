"""Attempts: running an exercise's checks against a student's program
(grader.py); the exercises themselves, attempts and grades are server/exercises/."""
