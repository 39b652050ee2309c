"""The ``lm_eval`` component: lm-eval benchmarks and the held-out split, as Metrics, a results JSON and a report."""

from .component import lm_eval

__all__ = ["lm_eval"]
