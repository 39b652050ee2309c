"""GRPO's promotion gate: did the mean reward per iteration rise beyond the noise of its history?

The last ``k`` iterations against the first ``k`` (a quarter of the history, at least 2), by a one-sided Welch t-test.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

#: The gate's significance level (one-sided).
ALPHA = 0.05
#: The fewest iterations per window.
MIN_WINDOW = 2


@dataclasses.dataclass(frozen=True)
class RewardGate:
    """The gate's decision (``passed``: ``gain > 0`` and ``p_value < alpha``), its Welch test's numbers and why."""

    passed: bool
    iterations: int
    window: int
    first_mean: float
    last_mean: float
    gain: float
    standard_error: float
    t: float
    degrees_of_freedom: float
    p_value: float
    alpha: float
    reason: str

    def metrics(self) -> dict[str, float]:
        """The KFP metrics (the registry's ``min_metric_name`` gate reads ``reward_gate_passed``)."""
        values = {
            "reward_gate_passed": float(self.passed),
            "reward_first_mean": self.first_mean,
            "reward_last_mean": self.last_mean,
            "reward_gain": self.gain,
            "reward_gain_standard_error": self.standard_error,
            "reward_gate_p_value": self.p_value,
            "reward_gate_window": float(self.window),
            "reward_iterations": float(self.iterations),
        }
        return {name: value for name, value in values.items() if math.isfinite(value)}

    def line(self) -> str:
        """The decision in one line, with its numbers."""
        verdict = "PASSED" if self.passed else "NOT PASSED"
        return (
            f"reward gate {verdict}: mean reward of the last {self.window} iterations {self.last_mean:.3f} vs the "
            f"first {self.window} {self.first_mean:.3f} (gain {self.gain:+.3f} +- {self.standard_error:.3f} s.e., "
            f"Welch t={self.t:.2f}, df={self.degrees_of_freedom:.1f}, one-sided p={self.p_value:.4f}, "
            f"alpha={self.alpha}): {self.reason}"
        )


def reward_gate(history: Sequence[float], alpha: float = ALPHA) -> RewardGate:
    """Decides whether the mean reward per iteration (``history``, in order) rose beyond noise at level ``alpha``.

    Returns:
        The decision and its numbers (NaN where the history is too short to compute them).
    """
    values = [float(value) for value in history if math.isfinite(float(value))]
    window = max(MIN_WINDOW, len(values) // 4)
    nan = float("nan")
    if len(values) < 2 * window:
        reason = f"{len(values)} iterations cannot tell: the gate needs at least {2 * MIN_WINDOW}"
        return RewardGate(False, len(values), window, nan, nan, nan, nan, nan, nan, 1.0, alpha, reason)
    first, last = values[:window], values[-window:]
    first_mean, last_mean = statistics.fmean(first), statistics.fmean(last)
    gain = last_mean - first_mean
    standard_error = math.sqrt((statistics.variance(first) + statistics.variance(last)) / window)
    if standard_error == 0.0:  # both windows flat: the gain is exact (scipy would answer NaN)
        t = math.copysign(math.inf, gain) if gain else 0.0
        degrees_of_freedom = float(2 * window - 2)
        p_value = 0.0 if gain > 0 else 1.0
    else:
        from scipy import stats

        test = stats.ttest_ind(last, first, equal_var=False, alternative="greater")
        t, degrees_of_freedom, p_value = float(test.statistic), float(test.df), float(test.pvalue)
    passed = gain > 0 and p_value < alpha
    if passed:
        reason = "the reward rose beyond the noise of its history"
    elif gain <= 0:
        reason = "the reward did not rise"
    else:
        reason = "the rise is within the noise of the history (train longer, or with larger groups/batches)"
    return RewardGate(
        passed, len(values), window, first_mean, last_mean, gain, standard_error, t, degrees_of_freedom, p_value,
        alpha, reason,
    )  # fmt: skip
