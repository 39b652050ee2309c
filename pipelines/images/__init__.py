"""The container images a compiled pipeline names: which ones, whether each can be pulled, and their mirror list."""
