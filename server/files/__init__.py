"""Users' files on STORAGE_ROOT and their HTTP endpoints."""
