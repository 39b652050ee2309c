"""Fixture module (filled in by its component issue)."""
