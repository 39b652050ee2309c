"""The cluster client: auth, requests, job kinds, runtimes, submit/follow/diagnose/clean up (see runner.py)."""
