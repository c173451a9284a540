"""The admin's view of the server: its status."""
