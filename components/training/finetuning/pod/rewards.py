"""GRPO's verifiable reward for ``reward_answer`` rows, with verl's custom-reward signature.

Training Hub serialises it with ``inspect.getsource``, so it is self-contained: its imports are inside it.
"""

from __future__ import annotations


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):  # noqa: ANN001, ANN201
    """Scores one completion in [0, 1]: 1.0 when its answer is right, else at most 0.5 of format credit.

    The answer is the last number when ``ground_truth`` is a number, else the last non-empty line (compared without
    case, spaces and full stops). A wrong answer earns half the share of its non-space characters that are numeric.
    """
    import re

    text = str(solution_str or "")
    truth = str(ground_truth).strip()
    number = r"-?\d+(?:\.\d+)?"
    numbers = re.findall(number, text)
    if re.fullmatch(number, truth):
        if numbers and float(numbers[-1]) == float(truth):
            return 1.0
    else:
        lines = [line.strip().strip(".").lower() for line in text.splitlines() if line.strip()]
        if lines and lines[-1] == truth.strip(".").lower():
            return 1.0
    visible = [character for character in text if not character.isspace()]
    if not visible:
        return 0.0
    numeric = sum(1 for character in visible if character.isdigit() or character in "-.")
    return 0.5 * numeric / len(visible)
