"""Test harness shared by every component's tests: tiny model, demo data, kfp.local and real loopback servers."""
