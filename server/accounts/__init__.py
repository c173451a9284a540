"""Accounts, passwords, sessions and login throttling."""
