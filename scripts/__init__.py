"""Generators and validators (runnable as scripts)."""
