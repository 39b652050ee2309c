"""Fixture module (filled in by the CLI/KFP API work)."""
