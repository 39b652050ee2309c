"""What runs in the training pods (standard library only; staged onto the workspace PVC by launch.py)."""
