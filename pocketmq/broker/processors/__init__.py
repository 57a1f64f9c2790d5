"""Request processors of the broker, one module per concern (send, admin, client management)."""
