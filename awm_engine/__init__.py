"""awm engine."""
