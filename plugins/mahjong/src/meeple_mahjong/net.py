"""The mahjong network: a squeeze-excitation ResNet over the 34 tile kinds (docs/mahjong_model.md).

One observation is 84 planes x 34 kinds (docs/mahjong_encoding.md). Convolutions run along the
kinds (a 3-wide kernel sees neighbouring ranks: runs, suji) with the planes as input channels;
GroupNorm rather than BatchNorm, so a PPO minibatch, a one-table evaluation and a BC batch of
2,048 normalise alike; squeeze-excitation lets each block reweight its channels from the whole
hand. A 1x1 "neck" and one linear layer turn the tile features into the ``hidden`` vector that
every head reads:

- policy: 155 logits (masked by ``action_mask`` in the actor's distribution and in BC's loss),
- value: one scalar,
- auxiliary (BC targets, ``with_aux=True``): final rank (4 logits), per-opponent tenpai
  (3 logits) and per-kind deal-in danger (34 logits).

:func:`build_mahjong_actor_critic` returns the same TorchRL actor (ProbabilisticActor over a
masked categorical) and critic (ValueOperator) on one shared trunk as the core model factories,
so PPO (phase 3) builds it unchanged; BC asks for the auxiliary heads too.
"""

from __future__ import annotations

import math

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.data import Composite, TensorSpec
from torchrl.modules import ProbabilisticActor

from meeple.errors import ConfigError
from meeple.nets.actor_critic import (
    MASK_KEY,
    OBS_KEY,
    num_actions,
    observation_shape,
    shared_heads,
)
from meeple.nets.caller_input import CallerInput
from meeple.nets.kinds import mark_actor_critic_factory
from meeple.nets.mlp import orthogonal_linear
from meeple_native import mahjong as _mj

from .safety import RIICHI_OFFSET, OracleSafetyMask, discard_kinds
from .specs import WIDTH

LOOKAHEAD_PLANES = _mj.LOOKAHEAD_PLANES  # what encode_lookahead_planes returns per observation
ORACLE_KEY = "oracle"  # the env's hidden-information planes (env.oracle=true), phase 2's teacher
HIDDEN_KEY = "hidden"
LOOKAHEAD_KEY = "lookahead_planes"  # the trunk's lookahead planes, with model.lookahead
# what a caller of an exported network with the planes runs to compute them (docs/export.md)
LOOKAHEAD_HOW = ("from meeple_native import mahjong; mahjong.encode_lookahead(observation, threads): "
                 "float32 (batch, 84, 34) -> (batch, 5, 34)")
TILE_KEY = "tile_features"  # the trunk's feature map (channels x 34 kinds), with model.tile_head
DANGER_KEY = "danger_logits"  # per kind: discarding it now deals in (model.danger_head)
# Auxiliary outputs (logits) and their widths: what BC's `phase.aux` names as `output`.
AUX_OUTPUTS = {"aux_rank": 4, "aux_tenpai": 3, "aux_danger": 34}
HIDDEN_GAIN = math.sqrt(2)  # ReLU layers
LOGIT_GAIN = 0.01  # policy and auxiliary logits start near uniform
VALUE_GAIN = 1.0


def _conv(in_channels: int, out_channels: int, kernel: int) -> nn.Conv1d:
    conv = nn.Conv1d(in_channels, out_channels, kernel, padding=kernel // 2)
    nn.init.orthogonal_(conv.weight, HIDDEN_GAIN)
    nn.init.zeros_(conv.bias)
    return conv


class SqueezeExcitation(nn.Module):
    """Channel gates from the mean over the kinds: x * sigmoid(W2 relu(W1 mean(x)))."""

    def __init__(self, channels: int, ratio: int) -> None:
        super().__init__()
        squeezed = max(channels // ratio, 1)
        self.reduce = orthogonal_linear(channels, squeezed, HIDDEN_GAIN)
        self.expand = orthogonal_linear(squeezed, channels, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.expand(torch.relu(self.reduce(x.mean(-1)))))
        return x * gate.unsqueeze(-1)


class SEResidualBlock(nn.Module):
    """conv-GN-ReLU-conv-GN-SE plus the skip, then ReLU. The second GroupNorm's scale starts at
    0, so every block starts as the identity and 40 of them train from the first step."""

    def __init__(self, channels: int, groups: int, se_ratio: int) -> None:
        super().__init__()
        self.conv1 = _conv(channels, channels, 3)
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv2 = _conv(channels, channels, 3)
        self.norm2 = nn.GroupNorm(groups, channels)
        nn.init.zeros_(self.norm2.weight)
        self.se = SqueezeExcitation(channels, se_ratio)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.norm1(self.conv1(x)))
        y = self.se(self.norm2(self.conv2(y)))
        return torch.relu(x + y)


class DangerHead(nn.Module):
    """``hidden -> (..., 34)``: the logit that discarding each kind now deals in, a belief about
    the opponents' hidden waits read from public planes. It learns from `phase.aux` on labels the
    oracle planes give during training (:func:`meeple_mahjong.safety.ron_kinds`); a checkpoint
    plays without them."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.danger = orthogonal_linear(hidden, WIDTH, LOGIT_GAIN)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.danger(hidden)


def encode_lookahead_planes(observation: torch.Tensor) -> torch.Tensor:
    """``(..., 84, 34) -> (..., 5, 34)``: the lookahead planes of public observations, computed in
    C++ (:func:`meeple_native.mahjong.encode_lookahead`: per discard kind the shanten after it and
    its live advancing tiles, the rule bot's ukeire; docs/mahjong_encoding.md), without gradient and
    on the CPU over torch's thread count (a copy there and back for a GPU tensor), in the
    observation's dtype and device."""
    with torch.no_grad():
        public = observation.detach().to("cpu", torch.float32).contiguous()
        planes = torch.from_numpy(_mj.encode_lookahead(public, torch.get_num_threads()))
    return planes.to(observation.device, observation.dtype)


class MahjongTrunk(nn.Module):
    """``(..., planes, 34)`` (and the oracle planes when ``oracle_planes`` > 0) -> ``(..., hidden)``."""

    def __init__(
        self,
        planes: int,
        width: int,
        *,
        blocks: int,
        channels: int,
        groups: int,
        se_ratio: int,
        neck: int,
        hidden: int,
        oracle_planes: int = 0,
        tile_features: bool = False,
        danger_head: bool = False,
        lookahead: bool = False,
    ) -> None:
        super().__init__()
        self.tile_features = tile_features  # also return the blocks' feature map
        # also return a DangerHead's logits (inside the trunk, so the carried weights keep their names)
        self.danger_head = DangerHead(hidden) if danger_head else None
        self.planes = planes
        self.stem = nn.Sequential(
            _conv(planes, channels, 3), nn.GroupNorm(groups, channels), nn.ReLU()
        )
        # The oracle planes get their own convolution, added to the stem's before its norm (the
        # same function as one wider convolution). It starts at zero, so a teacher carried from
        # the phase-1 clone starts as that clone, and these new weights are their own parameter,
        # which an optimiser can give its own learning rate (phase.lr_groups).
        self.oracle_stem = None
        if oracle_planes:
            self.oracle_stem = nn.Conv1d(oracle_planes, channels, 3, padding=1, bias=False)
            nn.init.zeros_(self.oracle_stem.weight)
        # The lookahead planes (encode_lookahead_planes) get their own convolution too, also starting at
        # zero so a network carried from a gate without them starts as that gate. Why they exist:
        # the clone's discards differ from its rule-bot teacher's mostly where the bot counts the
        # live tiles each discard leaves (docs/rl_diagnostics.md, sections t and u).
        self.lookahead_stem = None
        if lookahead:
            # C++ computes the planes, which a traced graph cannot hold: an exported network takes
            # them as an input its caller computes (meeple.nets.caller_input)
            self.onnx_caller_inputs = (CallerInput(LOOKAHEAD_KEY, (LOOKAHEAD_PLANES, width), encode_lookahead_planes,
                                                   LOOKAHEAD_HOW),)  # fmt: skip
            self.lookahead_stem = nn.Conv1d(LOOKAHEAD_PLANES, channels, 3, padding=1, bias=False)
            nn.init.zeros_(self.lookahead_stem.weight)
        self._register_load_state_dict_pre_hook(self._split_wide_stem)
        self.blocks = nn.Sequential(
            *(SEResidualBlock(channels, groups, se_ratio) for _ in range(blocks))
        )
        self.neck = nn.Sequential(_conv(channels, neck, 1), nn.ReLU(), nn.Flatten(-2))
        self.project = nn.Sequential(
            orthogonal_linear(neck * width, hidden, HIDDEN_GAIN), nn.ReLU()
        )

    def forward(
        self, observation: torch.Tensor, oracle: torch.Tensor | None = None, *,
        lookahead_planes: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``lookahead_planes``: given by an exported graph's caller; computed here when None."""
        lead = observation.shape[:-2]  # any batch dims in front (collectors, BC batches)
        conv, norm, relu = self.stem
        flat = observation.reshape(-1, *observation.shape[-2:])
        x = conv(flat)
        if self.lookahead_stem is not None:
            if lookahead_planes is None:
                planes = encode_lookahead_planes(flat)
            else:
                planes = lookahead_planes.reshape(-1, *lookahead_planes.shape[-2:])
            x = x + self.lookahead_stem(planes)
        if self.oracle_stem is not None:
            x = x + self.oracle_stem(oracle.reshape(-1, *oracle.shape[-2:]))
        features = self.blocks(relu(norm(x)))
        y = self.project(self.neck(features)).reshape(*lead, -1)
        out = [y]
        if self.tile_features:
            out.append(features.reshape(*lead, *features.shape[-2:]))
        if self.danger_head is not None:
            out.append(self.danger_head(y))
        if self.lookahead_stem is not None:
            out.append(planes.reshape(*lead, *planes.shape[-2:]))
        return tuple(out) if len(out) > 1 else y

    def _split_wide_stem(self, state: dict, prefix: str, *args) -> None:
        """A checkpoint written before the oracle convolution had its own weight (one stem
        convolution over public + oracle planes) loads as the same function."""
        key = prefix + "stem.0.weight"
        wide = state.get(key)
        if self.oracle_stem is not None and wide is not None and wide.shape[1] > self.planes:
            state[key], state[prefix + "oracle_stem.weight"] = wide[:, : self.planes], wide[:, self.planes :]


class KindLogits(nn.Module):
    """``(..., channels, 34) -> (..., 155)``: for each tile kind, a discard logit and a
    riichi-with-discard logit read from that kind's column of per-kind inputs (a 1x1 convolution;
    the trunk's feature map with ``model.tile_head``, the lookahead planes with ``model.lookahead``),
    placed at the actions that give that kind away (red fives read their kind's column); 0 for
    every other action. Zero at initialisation, so adding it changes no policy until it learns.

    Why: the global policy layer reads one ``hidden`` vector, so a per-kind fact (this kind deals
    in) must be squeezed through it for all 34 kinds; here it stays in its column
    (docs/rl_diagnostics.md measures the difference)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(channels, 2, 1)
        nn.init.zeros_(self.conv.weight)
        nn.init.zeros_(self.conv.bias)
        kinds = discard_kinds()
        self.register_buffer("discard", kinds[:RIICHI_OFFSET].clone(), persistent=False)
        self.register_buffer("riichi", kinds[RIICHI_OFFSET : 2 * RIICHI_OFFSET].clone(), persistent=False)
        self.num_actions = len(kinds)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        local = self.conv(features.reshape(-1, *features.shape[-2:]))  # (B, 2, 34)
        out = local.new_zeros(local.shape[0], self.num_actions)
        out[:, : len(self.discard)] = local[:, 0].index_select(-1, self.discard)
        out[:, RIICHI_OFFSET : RIICHI_OFFSET + len(self.riichi)] = local[:, 1].index_select(-1, self.riichi)
        return out.reshape(*features.shape[:-2], self.num_actions)


class DangerShift(nn.Module):
    """``danger_logits -> (..., 155)``: ``scale * log(1 - p)`` at the actions that give away a kind
    of danger ``p`` (discards and riichi discards), 0 at the others. ``scale`` is learned and
    starts at 0, so a carried policy starts unchanged; the belief is detached here, so only its
    own labels train it and the policy's loss sets how much the policy heeds it.

    Why: a public policy distilled from the oracle teacher kept phase 1's mass on dealing
    discards (docs/rl_diagnostics.md, section i); this gives it the teacher's main reason in a
    form it can weigh with one parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.danger_scale = nn.Parameter(torch.zeros(()))
        kinds = discard_kinds()
        self.register_buffer("kinds", kinds.clamp_min(0), persistent=False)
        self.register_buffer("gives", kinds >= 0, persistent=False)

    def forward(self, danger: torch.Tensor) -> torch.Tensor:
        safe = -nn.functional.softplus(danger.detach())  # log(1 - sigmoid(x))
        by_action = safe.index_select(-1, self.kinds) * self.gives
        return self.danger_scale * by_action


class Addends(nn.Module):
    """The sum of several logits addends, the i-th reading the i-th input."""

    def __init__(self, *parts: nn.Module) -> None:
        super().__init__()
        self.parts = nn.ModuleList(parts)

    def forward(self, *values: torch.Tensor) -> torch.Tensor:
        return sum(part(value) for part, value in zip(self.parts, values, strict=True))

    def adapt_carried_state(self, state: dict[str, torch.Tensor], prefix: str) -> None:
        """A gate whose network had one addend (its keys ``addend.*``, see :func:`build_mahjong_actor_critic`)
        carries into the part here with the same keys and shapes, so a stage may add an addend to
        its gate's (the tile head to a phase-1 clone with the lookahead planes); the other parts
        keep their initialisation (``transition.keep_new_params``)."""
        single = {k[len(prefix):]: k for k in state if k.startswith(prefix) and not k.startswith(prefix + "parts.")}
        if not single:
            return
        for i, part in enumerate(self.parts):
            own = part.state_dict()
            if own.keys() == single.keys() and all(own[n].shape == state[k].shape for n, k in single.items()):
                for name, key in single.items():
                    state[f"{prefix}parts.{i}.{name}"] = state.pop(key)
                return


class AuxiliaryHeads(nn.Module):
    """``hidden`` -> the logits of :data:`AUX_OUTPUTS`, in that order."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.heads = nn.ModuleList(
            orthogonal_linear(hidden, n, LOGIT_GAIN) for n in AUX_OUTPUTS.values()
        )

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(head(hidden) for head in self.heads)


class OracleValue(nn.Module):
    """``(observation, oracle) -> (..., 1)``: a value correction from the public and the oracle
    planes together, through its own trunk (an asymmetric critic: the critic sees the hidden
    tiles, the actor does not, so the policy a checkpoint plays still reads public planes only).
    Its output layer starts at zero, so a critic carried from phase 1 starts as that critic;
    its oracle convolution starts like any other (not at zero, as the teacher's carried stem
    must), since nothing carried depends on it."""

    def __init__(self, trunk: MahjongTrunk, hidden: int) -> None:
        super().__init__()
        self.trunk = trunk
        nn.init.orthogonal_(trunk.oracle_stem.weight, HIDDEN_GAIN)
        self.out = nn.Linear(hidden, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, observation: torch.Tensor, oracle: torch.Tensor) -> torch.Tensor:
        return self.out(self.trunk(observation, oracle))


def _positive(name: str, value: int, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(
            f"model.{name}={value!r} is not allowed; accepted: an integer >= {minimum}"
        )


@mark_actor_critic_factory
def build_mahjong_actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    *,
    blocks: int,
    channels: int,
    groups: int = 8,
    se_ratio: int = 16,
    neck: int = 32,
    hidden: int = 256,
    oracle_planes: int = 0,
    oracle_safety: bool = False,
    tile_head: bool = False,
    detach_critic: bool = False,
    oracle_critic: int = 0,
    danger_head: bool = False,
    lookahead: bool = False,
    policy_temperature: float = 1.0,
    with_aux: bool = False,
) -> (
    tuple[ProbabilisticActor, TensorDictModule]
    | tuple[ProbabilisticActor, TensorDictModule, TensorDictSequential]
):
    """Actor and critic on one SE-ResNet trunk; with ``with_aux`` also the auxiliary module
    (trunk + :class:`AuxiliaryHeads`, writing :data:`AUX_OUTPUTS`), sharing the trunk's weights.

    ``oracle_planes`` > 0 adds a convolution of the env's ``oracle`` planes to the stem's (phase 2);
    ``oracle_safety`` then also blocks the discards those planes show an opponent can ron on,
    while another action is legal (:class:`meeple_mahjong.safety.OracleSafetyMask`);
    ``tile_head`` adds per-kind discard logits from the feature map (:class:`KindLogits`);
    ``detach_critic``: the value loss trains the value head only, not the shared trunk;
    ``oracle_critic`` > 0 adds to the value an :class:`OracleValue` of that many blocks over the
    public and oracle planes (env.oracle=true): the critic reads the hidden tiles, the actor not;
    ``danger_head`` adds a :class:`DangerHead` (writing ``danger_logits``, for `phase.aux`) that
    the policy reads through a :class:`DangerShift` of its discard logits;
    ``lookahead`` adds the lookahead planes (:func:`encode_lookahead_planes`: what each discard does to
    the hand, computed from the public planes) to the stem and, through a :class:`KindLogits` of
    its own, straight to the discard logits; both start at zero;
    ``policy_temperature`` T: the policy is softmax(logits / T) (T < 1: sharper, same argmax).
    """
    shape = observation_shape(observation_spec)
    if len(shape) != 2:
        raise ConfigError(
            f"model mahjong_resnet reads (planes, 34) observations; the env's are {shape}"
        )
    for name, value, minimum in (
        ("blocks", blocks, 0),
        ("channels", channels, 1),
        ("groups", groups, 1),
        ("se_ratio", se_ratio, 1),
        ("neck", neck, 1),
        ("hidden", hidden, 1),
        ("oracle_planes", oracle_planes, 0),
        ("oracle_critic", oracle_critic, 0),
    ):
        _positive(name, value, minimum)
    if channels % groups:
        raise ConfigError(
            f"model.groups={groups} does not divide model.channels={channels}; accepted: a divisor "
            "of channels (GroupNorm)"
        )
    in_keys = [OBS_KEY]
    oracle_shape = None
    if ORACLE_KEY in observation_spec.keys():
        oracle_shape = tuple(observation_spec[ORACLE_KEY].shape[len(observation_spec.shape) :])
    for name, value in (("oracle_planes", oracle_planes), ("oracle_critic", oracle_critic)):
        if value and oracle_shape is None:
            raise ConfigError(
                f"model.{name}={value} but the env has no {ORACLE_KEY!r} observation; "
                f"accepted: env.oracle=true, or model.{name}=0"
            )
    if oracle_planes:
        if oracle_shape != (oracle_planes, shape[1]):
            raise ConfigError(
                f"model.oracle_planes={oracle_planes} but the env's oracle planes are {oracle_shape}; "
                f"accepted: model.oracle_planes={oracle_shape[0]}"
            )
        in_keys.append(ORACLE_KEY)
    if oracle_safety and not oracle_planes:
        raise ConfigError(
            "model.oracle_safety=true reads the oracle planes; accepted: with model.oracle_planes=205 "
            "(and env.oracle=true), or model.oracle_safety=false"
        )
    planes, width = shape
    sizes = {"channels": channels, "groups": groups, "se_ratio": se_ratio, "neck": neck, "hidden": hidden}
    trunk = TensorDictModule(
        MahjongTrunk(planes, width, blocks=blocks, oracle_planes=oracle_planes, tile_features=tile_head,
                     danger_head=danger_head, lookahead=lookahead, **sizes),  # fmt: skip
        in_keys,
        [HIDDEN_KEY, *([TILE_KEY] if tile_head else []), *([DANGER_KEY] if danger_head else []),
         *([LOOKAHEAD_KEY] if lookahead else [])],
    )
    num_actions(action_spec)  # a discrete action spec, or a clear error
    addends = [(KindLogits(channels), TILE_KEY)] if tile_head else []
    if danger_head:
        addends.append((DangerShift(), DANGER_KEY))
    if lookahead:
        addends.append((KindLogits(LOOKAHEAD_PLANES), LOOKAHEAD_KEY))
    # one addend keeps its own state-dict keys (addend.*), as checkpoints before Addends have them
    addend = addends[0][0] if len(addends) == 1 else Addends(*(m for m, _ in addends)) if addends else None
    actor, critic = shared_heads(
        trunk, hidden, observation_spec, action_spec,
        OracleSafetyMask() if oracle_safety else None, (ORACLE_KEY, MASK_KEY) if oracle_safety else (),
        addend, tuple(key for _, key in addends),
        detach_critic=detach_critic,
        value_addend=OracleValue(
            MahjongTrunk(planes, width, blocks=oracle_critic, oracle_planes=oracle_shape[0], **sizes), hidden
        ) if oracle_critic else None,
        value_keys=(OBS_KEY, ORACLE_KEY) if oracle_critic else (),
        temperature=policy_temperature,
    )  # fmt: skip
    if not with_aux:
        return actor, critic
    aux = TensorDictSequential(
        trunk, TensorDictModule(AuxiliaryHeads(hidden), [HIDDEN_KEY], list(AUX_OUTPUTS))
    )
    return actor, critic, aux
