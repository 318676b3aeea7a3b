"""Hyperparameter sweeps on Optuna 5 behind a Hydra Sweeper plugin.

``python train.py -m hparams_search=<name>`` selects the sweeper
``hydra_plugins.meeple_optuna_sweeper`` (a thin Hydra adapter); the logic lives here:

- :mod:`meeple.sweep.space`     Hydra sweep overrides -> Optuna distributions
- :mod:`meeple.sweep.factories` samplers, pruners and storages by name
- :mod:`meeple.sweep.runner`    study creation (resume), trial loop, best_params.yaml
- :mod:`meeple.sweep.pruning`   the Lightning callback that reports to the trial and prunes
- :mod:`meeple.sweep.tracking`  the sweep's MLflow parent run and its nested trial runs
- :mod:`meeple.sweep.plots`     optimisation history, parallel coordinates, importances
"""
