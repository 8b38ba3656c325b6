"""TLS listeners: the accepting side, its configuration and the principal of a session."""
