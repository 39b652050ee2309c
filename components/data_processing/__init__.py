"""data processing components."""
