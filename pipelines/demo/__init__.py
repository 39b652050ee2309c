"""Offline demo assets: a tiny chat model and a generated chat dataset, for the local demo and the tests."""
