"""Sign-in with the school's accounts: OpenID Connect (issue 34)."""
