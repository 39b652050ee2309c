"""deployment components."""
