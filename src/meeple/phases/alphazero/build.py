"""AlphaZero on a plugin's two-player game (``phase.game``, entry points ``meeple.games``):
self-play engine -> replay buffer -> ``AlphaZeroModule``, gated."""

from __future__ import annotations

from dataclasses import asdict
from functools import partial

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from meeple.data.collectors import collector_options
from meeple.phases.alphazero.callbacks import AlphaZeroGate
from meeple.phases.alphazero.data import SelfPlayDataModule
from meeple.phases.alphazero.schema import AlphaZeroPhase
from meeple.phases.parts import PhaseParts
from meeple.plugins.registry import load_game
from meeple.seeding import Component, PhaseSeeds, seed_process


def build_alphazero(cfg: DictConfig, typed: dict, seeds: PhaseSeeds) -> PhaseParts:
    phase: AlphaZeroPhase = typed["phase"]
    game = load_game(phase.game)
    seed_process(seeds.seed(Component.MODEL_INIT))
    net = instantiate(cfg.model)(game.planes_shape, game.num_actions)
    module = instantiate(cfg.phase.module)(
        net,
        optimizer=instantiate(cfg.phase.optimizer),
        weight_decay=phase.weight_decay,
        value_coef=phase.value_coef,
        max_grad_norm=phase.max_grad_norm,
    )
    if typed["hardware"].compile:
        # In place (state_dict keys unchanged), so the gate's weight copy still matches.
        module.net.compile()
        module.best.compile()
    datamodule = SelfPlayDataModule(
        game=game,
        seeds=seeds,
        games_per_iteration=phase.games_per_iteration,
        train_steps=phase.train_steps,
        batch_size=phase.batch_size,
        replay_size=phase.replay_size,
        min_replay=phase.min_replay,
        augment_mirror=phase.augment_mirror,
        engine=OmegaConf.to_container(cfg.phase.selfplay, resolve=True),
        engine_factory=_ray_engine(cfg, phase),
    )
    datamodule.attach(lambda: module.best)
    gate = AlphaZeroGate(game, **asdict(phase.gate))
    return PhaseParts(module=module, datamodule=datamodule, max_epochs=phase.iterations, callbacks={"gate": gate})


def _ray_engine(cfg: DictConfig, phase: AlphaZeroPhase):
    """With ``collector=ray``, the factory of self-play in Ray actors; otherwise None (in process)."""
    if cfg.collector.type != "ray":
        return None
    from meeple.phases.alphazero.ray_selfplay import DEFAULT_ACTORS, RaySelfPlay

    options = collector_options(cfg.collector)
    return partial(RaySelfPlay, game=phase.game, net_builder=instantiate(cfg.model),
                   actors=int(options.get("actors") or DEFAULT_ACTORS), address=options.get("address"),
                   cpus_per_actor=float(options.get("cpus_per_actor", 1)))
