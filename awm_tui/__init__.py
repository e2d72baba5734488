"""awm TUI."""
