"""training components."""
