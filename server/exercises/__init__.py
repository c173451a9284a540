"""Exercises that check themselves (issue 23): the format (model.py), what students may see (visibility.py), the service (service.py), attempts and the gradebook."""
