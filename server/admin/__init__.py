"""Teacher and admin endpoints."""
