"""Rebuild a checkpoint's policy as a plain ``nn.Module`` that tracers and runtimes understand.

``ExportedPolicy(observation[, action_mask][, *caller inputs]) -> (logits[, value])``: tensors in,
tensors out, no TensorDict and no distribution (caller inputs: what a network computes from the
observation with native code, given to the traced graph by its caller; ``meeple.nets.caller_input``). Logits of illegal actions are set to :data:`MASKED_LOGIT` (large
and finite: ``-inf`` turns a softmax over an all-illegal row into NaNs). ``value`` is the critic's
state value; a checkpoint without a critic has no ``value`` output (never a made-up zero).

Two model families, told apart by the weights a checkpoint holds:

- ``actor.*`` (``critic.*``): TorchRL modules from ``instantiate(cfg.model)(observation_spec,
  action_spec)`` (phases ppo, bc; ``meeple.nets.actor_critic``, ``meeple.nets.planes``), rebuilt on
  the specs of the env the checkpoint was trained on. :class:`TensorDictHeads` replays the
  modules' key wiring on plain tensors, so a trunk shared by actor and critic runs once.
- ``best.*`` / ``net.*``: one network ``forward(x) -> (logits, value)`` (alphazero's
  ``az_resnet``: ``best`` is the gated network that plays, exported rather than the candidate;
  packed_ppo's ``packed_cnn``), built from the game's or the packed env's shapes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch import nn

from meeple.checkpoint.actor import checkpoint_file
from meeple.checkpoint.io import CheckpointError, load_verified
from meeple.env_factory import backend_env
from meeple.errors import MeepleError
from meeple.nets.actor_critic import MASK_KEY, OBS_KEY, num_actions, observation_shape
from meeple.nets.caller_input import caller_inputs
from meeple.nets.policy_fn import greedy_policy
from meeple.phases.league.protocol import is_league_env, seat_self_play

MASKED_LOGIT = -1.0e9
LOGITS_KEY, VALUE_KEY = "logits", "state_value"


class ExportError(MeepleError):
    """A checkpoint that cannot be exported: names the file, the model and what is accepted."""


# -- the exported module -----------------------------------------------------------------------
class TensorDictHeads(nn.Module):
    """A TorchRL actor (and critic) run on plain tensors: ``observation -> (logits, value)``.

    The actor's and critic's ``TensorDictModule`` leaves are run in order, each reading its
    ``in_keys`` from and writing its ``out_keys`` to a dict of tensors; a leaf both hold (a
    shared trunk) runs once. The sampling module (a ``ProbabilisticTensorDictModule``) is
    left out: the exported policy stops at the logits.
    """

    def __init__(self, actor: nn.Module, critic: nn.Module | None) -> None:
        super().__init__()
        leaves: list[Any] = []
        for part in (actor, critic):
            for leaf in _leaves(part) if part is not None else ():
                if all(leaf is not seen for seen in leaves):
                    leaves.append(leaf)
        self.nets = nn.ModuleList(leaf.module for leaf in leaves)
        self.wiring = [(list(leaf.in_keys), list(leaf.out_keys)) for leaf in leaves]
        # what each net takes from the caller instead of computing it (meeple.nets.caller_input)
        self.net_caller_inputs = [caller_inputs(leaf.module) for leaf in leaves]
        self.caller_inputs = tuple(c for own in self.net_caller_inputs for c in own)
        written = {k for _, outs in self.wiring for k in outs}
        if LOGITS_KEY not in written:
            raise ExportError(f"the actor writes no {LOGITS_KEY!r} (it writes {sorted(written)})")
        self.has_value = critic is not None and VALUE_KEY in written

    def forward(self, observation: torch.Tensor, *given: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``given``: the :attr:`caller_inputs` in order, or none (each net computes its own)."""
        values: dict[Any, torch.Tensor] = {OBS_KEY: observation}
        by_name = dict(zip((c.name for c in self.caller_inputs), given, strict=True)) if given else {}
        for net, (ins, outs), own in zip(self.nets, self.wiring, self.net_caller_inputs, strict=True):
            out = net(*(values[k] for k in ins), **{c.name: by_name[c.name] for c in own if c.name in by_name})
            for k, v in zip(outs, out if isinstance(out, tuple) else (out,), strict=True):
                values[k] = v
        value = values[VALUE_KEY].squeeze(-1) if self.has_value else None
        return values[LOGITS_KEY], value


def _leaves(module: nn.Module) -> list[Any]:
    """The deterministic ``TensorDictModule`` leaves of a TorchRL module, in call order."""
    from tensordict.nn import ProbabilisticTensorDictModule, TensorDictModule, TensorDictSequential

    if isinstance(module, ProbabilisticTensorDictModule):
        return []
    if isinstance(module, TensorDictSequential):
        return [leaf for sub in module.module for leaf in _leaves(sub)]
    if isinstance(module, TensorDictModule):
        return [module]
    raise ExportError(f"cannot export a {type(module).__name__} inside a TorchRL actor or critic")


class NetHeads(nn.Module):
    """A network whose ``forward(x)`` already returns ``(logits, value)``."""

    has_value = True
    caller_inputs = ()

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        logits, value = self.net(observation)
        return logits, value.reshape(value.shape[0])


class ExportedPolicy(nn.Module):
    """``forward(observation[, action_mask]) -> (masked logits[, value])``, batch first."""

    def __init__(self, heads: TensorDictHeads | NetHeads, *, has_mask: bool) -> None:
        super().__init__()
        self.heads = heads
        self.has_mask = has_mask
        self.has_value = bool(heads.has_value)
        self.caller_inputs = tuple(heads.caller_inputs)  # graph inputs after the observation (and mask)

    def forward(self, observation: torch.Tensor, *rest: torch.Tensor):
        """``(observation[, action_mask][, *caller inputs])``; without the caller inputs the
        network computes them itself (eager torch; the traced graph takes them)."""
        action_mask, given = (rest[0], rest[1:]) if self.has_mask else (None, rest)
        logits, value = self.heads(observation, *given)
        if self.has_mask:
            logits = logits.masked_fill(~action_mask, MASKED_LOGIT)
        return (logits, value) if self.has_value else logits

    def input_names(self) -> list[str]:
        return [OBS_KEY, *([MASK_KEY] if self.has_mask else []), *(c.name for c in self.caller_inputs)]

    def output_names(self) -> list[str]:
        return ["logits", "value"] if self.has_value else ["logits"]


# -- loading -----------------------------------------------------------------------------------
Sampler = Callable[[int, int], "Samples"]


@dataclass
class Samples:
    """Observations to check an export on; ``greedy``: the eager TorchRL actor's deterministic
    action for each (None when the observations are random rather than recorded)."""

    observation: torch.Tensor
    action_mask: torch.Tensor | None
    greedy: torch.Tensor | None = None
    recorded: bool = False


@dataclass
class LoadedPolicy:
    """An :class:`ExportedPolicy` (eval mode, CPU) and what the sidecar says about it."""

    policy: ExportedPolicy
    file: Path
    model_target: str
    phase: str | None
    env: dict[str, Any]
    observation_shape: tuple[int, ...]
    observation_dtype: torch.dtype
    num_actions: int
    global_step: int | None = None
    timestamp: str | None = None
    sampler: Sampler | None = field(default=None, repr=False)

    def samples(self, n: int, seed: int = 0) -> Samples:
        """``n`` observations recorded from the env when it can be played, else random ones."""
        if self.sampler is not None:
            return self.sampler(n, seed)
        return random_samples(self, n, seed)


def load_policy(path: str | os.PathLike) -> LoadedPolicy:
    """The policy of a training checkpoint (file, gate file or run directory), ready to export."""
    file = checkpoint_file(path)  # a run directory: its newest stage
    ckpt = load_verified(file, map_location="cpu")
    config = ckpt.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise CheckpointError(f"{file}: no saved config with a model section; not a training checkpoint")
    weights = ckpt.get("model_state_dict") or {}
    target = str(config["model"].get("_target_"))
    phase = (config.get("phase") or {}).get("name")
    if _part(weights, "actor."):
        loaded = _load_torchrl(file, config, weights, target)
    elif _part(weights, "best.") or _part(weights, "net."):
        loaded = _load_net(file, config, weights, target, phase)
    else:
        prefixes = sorted({k.split(".", 1)[0] for k in weights})
        raise ExportError(
            f"{file}: no policy weights in model_state_dict (it holds {prefixes or 'nothing'}); "
            "accepted: a checkpoint with actor.* (ppo, bc), best.* (alphazero) or net.* (packed_ppo)"
        )
    loaded.phase = phase
    loaded.global_step = ckpt.get("global_step")
    loaded.timestamp = ckpt.get("timestamp")
    return loaded


def load_alphazero_network(path: str | os.PathLike, game: str) -> nn.Module:
    """The best (gated) network of an AlphaZero checkpoint of ``game`` (file, gate file or run
    directory), in eval mode: what a game's arena searches with."""
    loaded = load_policy(path)
    if loaded.phase != "alphazero" or loaded.env.get("game") != game:
        raise ExportError(f"{loaded.file}: a {loaded.phase!r} checkpoint of {loaded.env or 'an env'}; "
                          f"accepted: an alphazero checkpoint of phase.game={game}")
    return loaded.policy.heads.net.eval()


@cache
def _cached_network(path: str, game: str) -> nn.Module:
    return load_alphazero_network(path, game)


def search_player(player_class: type, checkpoint: str | os.PathLike, game: str, *, simulations: int,
                  seed: int) -> Any:
    """``player_class`` (a :class:`~meeple.plugins.arena.NativeMCTSPlayer`) searching
    ``simulations`` per move with ``checkpoint``'s network for ``game`` (loaded once per process):
    the opponent of the play server's AlphaZero games."""
    from meeple.phases.alphazero.evaluator import TorchEvaluator

    return player_class(TorchEvaluator(_cached_network(str(checkpoint), game)), num_simulations=simulations,
                        leaves_in_flight=1, seed=seed)


def _part(weights: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The weights under ``prefix``, without it and without torch.compile's ``_orig_mod``."""
    return {k[len(prefix) :].replace("._orig_mod", ""): v for k, v in weights.items() if k.startswith(prefix)}


def _build(file: Path, target: str, config: dict[str, Any], *args: Any) -> Any:
    try:
        return instantiate(OmegaConf.create(config["model"]))(*args)
    except Exception as err:  # an import, a changed signature, specs the model refuses
        raise ExportError(f"{file}: cannot rebuild model {target!r} ({type(err).__name__}: {err})") from err


def _load_weights(file: Path, target: str, module: nn.Module, state: dict[str, torch.Tensor], part: str) -> None:
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ExportError(
            f"{file}: the {part} weights do not fit model {target!r} built for this env "
            f"({' '.join(str(err).split())[:500]})"
        ) from err


def _make_env(file: Path, env_cfg: dict[str, Any], num_envs: int, seed: int):
    from meeple.env_factory import make_env

    try:
        return make_env(env_cfg, num_envs=num_envs, seed=seed)
    except Exception as err:
        raise ExportError(
            f"{file}: cannot build env backend {env_cfg.get('backend')!r} the checkpoint was trained on "
            f"({type(err).__name__}: {err}); accepted: a checkpoint of an env whose plugin is installed"
        ) from err


def _load_torchrl(file: Path, config: dict[str, Any], weights: dict[str, torch.Tensor], target: str) -> LoadedPolicy:
    from meeple.env_factory import batch_unit

    env_cfg = dict(config.get("env") or {})
    if "backend" not in env_cfg:
        raise ExportError(f"{file}: the saved config names no env backend (env.backend)")
    try:
        unit = batch_unit(env_cfg)
    except MeepleError as err:
        raise ExportError(f"{file}: cannot build env backend {env_cfg['backend']!r}: {err}") from err
    probe = _make_env(file, env_cfg, unit, 0)
    try:
        observation_spec, action_spec = probe.observation_spec, probe.action_spec
    finally:
        probe.close()
    actor, critic = _build(file, target, config, observation_spec, action_spec)
    _load_weights(file, target, actor, _part(weights, "actor."), "actor")
    critic_state = _part(weights, "critic.")
    if critic_state:
        _load_weights(file, target, critic, critic_state, "critic")
    else:
        critic = None
    has_mask = MASK_KEY in observation_spec.keys()
    policy = ExportedPolicy(TensorDictHeads(actor, critic), has_mask=has_mask).eval()
    actor.eval()
    obs_spec = observation_spec[OBS_KEY]
    loaded = LoadedPolicy(
        policy, file, target, None, env_cfg, observation_shape(observation_spec), obs_spec.dtype,
        num_actions(action_spec),
    )  # fmt: skip
    loaded.sampler = lambda n, seed: recorded_samples(file, env_cfg, unit, actor, has_mask, n, seed)
    return loaded


def recorded_samples(file: Path, env_cfg: dict[str, Any], unit: int, actor: nn.Module, has_mask: bool,
                     n: int, seed: int) -> Samples:  # fmt: skip
    """``n`` observations the env produced while the eager actor played it greedily, with the
    actor's deterministic action for each (TorchRL's mode of the masked distribution)."""
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    num_envs = unit * max(1, min(8, -(-n // (unit * 4))))  # a few steps of a small batch
    env = _make_env(file, env_cfg, num_envs, seed)
    base = backend_env(env)
    if is_league_env(base):  # a league stage's env: the policy plays every seat of its tables
        seat_self_play(base, greedy_policy(actor))
    try:
        steps = -(-n // num_envs)
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            rollout = env.rollout(steps, policy=actor, break_when_any_done=False)
    finally:
        env.close()
    flat = rollout.reshape(-1)[:n]
    action = flat["action"]
    greedy = action.argmax(-1) if action.shape[-1:] == flat[LOGITS_KEY].shape[-1:] and action.ndim > 1 else action
    return Samples(flat[OBS_KEY], flat[MASK_KEY] if has_mask else None, greedy.reshape(-1), recorded=True)


def random_samples(loaded: LoadedPolicy, n: int, seed: int) -> Samples:
    """Random observations of the right shape and dtype, random masks with a legal action each."""
    gen = torch.Generator().manual_seed(seed)
    shape = (n, *loaded.observation_shape)
    dtype = loaded.observation_dtype
    if dtype.is_floating_point:
        obs = torch.randn(shape, generator=gen).to(dtype)
    elif dtype == torch.bool:
        obs = torch.rand(shape, generator=gen) < 0.5
    else:
        high = 256 if dtype == torch.uint8 else 2
        obs = torch.randint(0, high, shape, generator=gen, dtype=dtype)
    mask = None
    if loaded.policy.has_mask:
        mask = torch.rand(n, loaded.num_actions, generator=gen) < 0.5
        mask[torch.arange(n), torch.randint(0, loaded.num_actions, (n,), generator=gen)] = True
    return Samples(obs, mask)


def _load_net(file: Path, config: dict[str, Any], weights: dict[str, torch.Tensor], target: str,
              phase: str | None) -> LoadedPolicy:  # fmt: skip
    if phase == "alphazero":
        from meeple.plugins.registry import load_game

        game_name = (config.get("phase") or {}).get("game")
        try:
            game = load_game(game_name)
        except MeepleError as err:
            raise ExportError(f"{file}: cannot load game {game_name!r} the checkpoint was trained on: {err}") from err
        shape, n_actions, dtype, has_mask = tuple(game.planes_shape), int(game.num_actions), torch.float32, True
        net = _build(file, target, config, shape, n_actions)
        env = {"game": game_name}
    elif phase == "packed_ppo":
        probe = _packed_probe(file, config)
        n_actions = int(probe.num_actions)
        net = _build(file, target, config, int(probe.frames_per_obs), n_actions)
        from meeple.envs.packed import FRAME_SHAPE

        shape, dtype, has_mask = (int(probe.frames_per_obs), *FRAME_SHAPE), torch.uint8, False
        env = dict(config.get("env") or {})
    else:
        raise ExportError(
            f"{file}: a {phase!r} checkpoint holds a single network; accepted: phase alphazero or "
            "packed_ppo for best.*/net.* weights"
        )
    prefix = "best." if _part(weights, "best.") else "net."
    _load_weights(file, target, net, _part(weights, prefix), prefix.rstrip("."))
    _trace_friendly(net)
    policy = ExportedPolicy(NetHeads(net), has_mask=has_mask).eval()
    return LoadedPolicy(policy, file, target, None, env, shape, dtype, n_actions)


def _packed_probe(file: Path, config: dict[str, Any]):
    factory = (config.get("env") or {}).get("factory")
    if not isinstance(factory, dict) or "_target_" not in factory:
        raise ExportError(f"{file}: the saved config has no env.factory to build the packed env from")
    try:
        return instantiate(OmegaConf.create(factory), _partial_=True)(num_envs=1, device="cpu")
    except Exception as err:
        raise ExportError(
            f"{file}: cannot build the packed env {factory['_target_']!r} ({type(err).__name__}: {err})"
        ) from err


def _trace_friendly(net: nn.Module) -> None:
    """Swap kernels a tracer cannot see through for their torch equivalents (same values)."""
    from meeple.nets.packed_cnn import PackedUnpack

    for module in net.modules():
        if isinstance(module, PackedUnpack):
            module.kernel = "torch"  # the Warp kernel is opaque to torch.export
