"""Helpers shared by every component: runtime delivery into the pod and small I/O utilities."""
