"""Behavioral cloning: train a policy (and optionally a value head) on recorded demonstrations.

Everything about the phase lives here:

- ``schema``: ``BCPhase`` (typed ``conf/phase/bc.yaml``) and ``check_bc``
- ``dataset``: the on-disk demonstration format (TensorDict memmap + ``meta.json``)
- ``record``: record demonstrations from a scripted controller or a checkpoint
  (``python -m meeple.phases.bc.record``)
- ``module``: ``BCModule`` (masked cross-entropy + value MSE)
- ``data``: ``DemonstrationDataModule`` (shuffled minibatches, validation, env for evaluation)
- ``build``: ``build_bc(cfg, typed, seeds) -> PhaseParts``

Kept free of imports so ``python -m meeple.phases.bc.record`` does not import its module twice.
"""
