"""Row and view types the screens share; below every screen (no screen is imported here)."""
