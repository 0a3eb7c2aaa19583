"""Evaluation: derived values, the interpreter in its guarded worker, baselines, kept values."""
