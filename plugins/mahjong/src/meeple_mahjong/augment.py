"""Suit permutation augmentation: relabel man/pin/sou consistently over a whole game.

A permutation is a tuple `perm` of the three suits, `perm[s]` = the suit that suit `s`
(0 man, 1 pin, 2 sou) becomes; `SUIT_PERMUTATIONS` lists all six ((0, 1, 2) = identity).
Honors are fixed. Tile ids keep their copy index, so a red five (copy 0 of a five) maps to
the red five of the new suit: de-aka, permute, re-aka in one step. Rules that look at
suits only through "same suit" (runs, flushes, dora order, suji) are invariant, so a
game replayed on permuted walls with permuted actions is the permuted game: its
observations are the column-permuted planes, its legal masks the permuted masks and its
MJAI stream the permuted stream (plugins/mahjong/tests/test_augment.py checks all three).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence

import numpy as np

from meeple_native import mahjong as _mj

SUIT_PERMUTATIONS: tuple[tuple[int, int, int], ...] = tuple(itertools.permutations(range(3)))  # type: ignore[assignment]
_SUIT_CHARS = "mps"
_TILE_RE = re.compile(r"^([1-9])([mps])(r?)$")


def _check(perm: Sequence[int]) -> tuple[int, int, int]:
    p = tuple(int(x) for x in perm)
    if sorted(p) != [0, 1, 2]:
        raise ValueError(
            f"suit permutation must be a permutation of (0, 1, 2) (man, pin, sou), got {tuple(perm)!r}"
        )
    return p  # type: ignore[return-value]


def kind_permutation(perm: Sequence[int]) -> np.ndarray:
    """int64[34]: new kind of each kind (honors fixed)."""
    p = _check(perm)
    out = np.arange(34, dtype=np.int64)
    for s in range(3):
        out[9 * s : 9 * s + 9] = np.arange(9) + 9 * p[s]
    return out


def tile_permutation(perm: Sequence[int]) -> np.ndarray:
    """int64[136]: new id of each tile id (kind permuted, copy kept; red stays red)."""
    kinds = kind_permutation(perm)
    ids = np.arange(136)
    return kinds[ids // 4] * 4 + ids % 4


def permute_tile(tile: int, perm: Sequence[int]) -> int:
    """The permuted 136 id of `tile` (-1 stays -1, the engine's "no tile")."""
    if tile == -1:
        return -1
    if not 0 <= tile < 136:
        raise ValueError(f"tile id must be in 0..135 (or -1), got {tile}")
    return int(tile_permutation(perm)[tile])


def permute_kind(kind: int, perm: Sequence[int]) -> int:
    if not 0 <= kind < 34:
        raise ValueError(f"tile kind must be in 0..33, got {kind}")
    return int(kind_permutation(perm)[kind])


def permute_wall(wall: Sequence[int], perm: Sequence[int]) -> list[int]:
    """A wall (136 ids) with every tile permuted, for `Game.reset_with_walls`."""
    if len(wall) != 136:
        raise ValueError(f"a wall has 136 tile ids, got {len(wall)}")
    tp = tile_permutation(perm)
    return [int(tp[t]) for t in wall]


def permute_action(action: _mj.Action, perm: Sequence[int]) -> _mj.Action:
    """The engine Action with its tile and consumed tiles permuted."""
    tp = tile_permutation(perm)
    tile = -1 if action.tile < 0 else int(tp[action.tile])
    return _mj.Action(action.type, tile, [int(tp[t]) for t in action.consumed])


def action_permutation(perm: Sequence[int]) -> np.ndarray:
    """int64[155]: index of the permuted action for each action index (docs/mahjong_encoding.md).

    Discard / riichi classes 0-33 follow the kinds and red classes 34-36 the suits; ankan and
    kakan kinds follow the kinds; chi, pon, daiminkan, tsumo, ron, pass and kyuushu are fixed.
    A legal mask permutes as `new_mask[action_permutation(p)] = mask`.
    """
    p = _check(perm)
    kinds = kind_permutation(p)
    out = np.arange(_mj.NUM_ACTIONS, dtype=np.int64)
    classes = np.concatenate([kinds, 34 + np.asarray(p, dtype=np.int64)])
    out[0:37] = classes
    out[37:74] = 37 + classes
    out[83:117] = 83 + kinds
    out[117:151] = 117 + kinds
    return out


def _gather_last(x, index: np.ndarray):
    """x[..., index] for numpy arrays and torch tensors alike (a new array / tensor)."""
    if isinstance(x, np.ndarray):
        return x[..., index]
    import torch  # only reached with a torch tensor

    return x[..., torch.as_tensor(index, device=x.device)]


def permute_mask(mask, perm: Sequence[int]):
    """A legal mask (..., 155) of the game mapped to the permuted game (numpy or torch).

    `new[..., action_permutation(perm)] = mask`, done as a gather with the inverse.
    """
    if mask.shape[-1] != _mj.NUM_ACTIONS:
        raise ValueError(
            f"mask must have {_mj.NUM_ACTIONS} entries on the last axis, got shape {tuple(mask.shape)}"
        )
    return _gather_last(mask, np.argsort(action_permutation(perm)))


def permute_planes(planes, perm: Sequence[int]):
    """Observation planes (..., P, 34) of a game mapped to the permuted game (numpy or torch).

    Every plane of both encoders is indexed by kind on its last axis and none depends on the
    suit otherwise (red-five planes sit at the five's column), so this is a column
    permutation: `new[..., kind_permutation(perm)] = planes`, done as a gather.
    """
    if planes.shape[-1] != 34:
        raise ValueError(
            f"planes must have 34 columns (tile kinds) on the last axis, got shape {tuple(planes.shape)}"
        )
    return _gather_last(planes, np.argsort(kind_permutation(perm)))


def _tile_string(s: str, suit_map: str) -> str:
    m = _TILE_RE.match(s)
    if not m:
        return s
    return m.group(1) + suit_map[_SUIT_CHARS.index(m.group(2))] + m.group(3)


def _tile_order(s: str) -> tuple[int, int]:
    kind, red = _mj.mjai_to_kind(s)
    return kind, 0 if red else 1  # the engine lists tiles by id: the red five (copy 0) first


def _walk(x, suit_map: str):
    if isinstance(x, str):
        return _tile_string(x, suit_map)
    if isinstance(x, dict):
        return {k: _walk(v, suit_map) for k, v in x.items()}
    if isinstance(x, list):
        y = [_walk(v, suit_map) for v in x]
        if y and all(isinstance(v, str) and v != "?" and _is_tile(v) for v in y):
            y.sort(key=_tile_order)  # the engine writes tile lists sorted by id
        return y
    return x


def _is_tile(s: str) -> bool:
    try:
        _mj.mjai_to_kind(s)
    except ValueError:
        return False
    return True


def permute_event(event: str | dict, perm: Sequence[int]) -> str:
    """One MJAI event (JSON line or dict) with every tile permuted ("5mr" -> "5pr" ...).

    Tile lists (tehais, consumed, markers) are re-sorted in tile-id order, the engine's order,
    so the permuted stream of an engine game equals the engine's stream of the permuted game.
    """
    p = _check(perm)
    suit_map = "".join(_SUIT_CHARS[p[s]] for s in range(3))
    obj = json.loads(event) if isinstance(event, str) else event
    return json.dumps(_walk(obj, suit_map), separators=(",", ":"))


def permute_events(events: Iterable[str | dict], perm: Sequence[int]) -> list[str]:
    """A whole MJAI stream, event by event (see `permute_event`)."""
    return [permute_event(e, perm) for e in events]
