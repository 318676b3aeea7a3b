"""The pipeline runner: an experiment's phases in order, their transitions and gates."""
