"""Demonstrations on disk: a TensorDict memmap of records plus a ``meta.json`` that says what they are.

Layout of a dataset folder::

    <path>/meta.json     format, version, env, spaces, counts, who recorded it, seed (see DemoMeta)
    <path>/data/         TensorDict.memmap of N records, batch size [N]:
                           observation  [N, *obs_shape]   the env's ``observation``
                           action       [N]    int64     index of the action taken
                           episode      [N]    int64     episode id (0..episodes-1)
                           action_mask  [N, A] bool      optional: legal actions
                           return       [N]    float32   optional: discounted return-to-go

Writing is crash-safe: records and meta go to a hidden ``.<name>.tmp-<pid>`` folder, every file
is fsynced, and one ``rename`` publishes the folder. A crash leaves only the hidden folder, which
:func:`load_demonstrations` never opens; a folder without ``meta.json`` is refused as incomplete.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import MISSING, asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from meeple.checkpoint.io import fsync_dir
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic

FORMAT = "meeple.demonstrations"
VERSION = 1
META_FILE = "meta.json"
DATA_DIR = "data"
REQUIRED_KEYS = ("observation", "action", "episode")
OPTIONAL_KEYS = ("action_mask", "return")


class DatasetError(MeepleError):
    """A demonstration dataset is missing, incomplete or does not match what reads it."""


@dataclass
class DemoMeta:
    """What ``meta.json`` holds (format version 1)."""

    env: dict[str, Any]  # backend and id/name of the env the records come from
    observation_shape: list[int]
    observation_dtype: str
    num_actions: int
    keys: list[str]  # record keys present (required + optional ones)
    episodes: int
    records: int
    recorded_by: str  # "scripted:<target>" or "checkpoint:<file>@step<n>"
    seed: int | None
    gamma: float | None  # discount of ``return`` (None when absent)
    episode_return: dict[str, float] = field(default_factory=dict)  # undiscounted: mean/min/max
    format: str = FORMAT
    version: int = VERSION


@dataclass
class Demonstrations:
    """A loaded dataset: ``records`` (memory-mapped, batch size [N]) and its ``meta``."""

    path: Path
    records: TensorDictBase
    meta: DemoMeta

    @property
    def has_mask(self) -> bool:
        return "action_mask" in self.records.keys()

    @property
    def has_return(self) -> bool:
        return "return" in self.records.keys()

    def split(self, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Record indices ``(train, val)``: whole episodes go to one side (see :func:`split_episodes`)."""
        train_eps, val_eps = split_episodes(self.meta.episodes, val_fraction, seed)
        episode = torch.as_tensor(self.records["episode"])
        in_val = torch.isin(episode, val_eps)
        index = torch.arange(len(episode))
        return index[~in_val], index[in_val]


def split_episodes(
    episodes: int, val_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Episode ids ``(train, val)``, each sorted: ``round(episodes * val_fraction)`` episodes (at
    least one when the fraction is > 0) drawn by a permutation seeded with ``seed``."""
    if not 0 <= val_fraction < 1:
        raise DatasetError(f"val_fraction={val_fraction!r}; accepted: a float in [0, 1)")
    n_val = 0 if val_fraction == 0 else max(round(episodes * val_fraction), 1)
    if n_val >= episodes:
        raise DatasetError(
            f"a validation share of {val_fraction} of {episodes} episode(s) leaves none to train on; "
            "accepted: more episodes (phase.data.record.episodes) or a smaller phase.data.val_fraction"
        )
    order = torch.randperm(episodes, generator=torch.Generator().manual_seed(seed))
    return order[n_val:].sort().values, order[:n_val].sort().values


# -- writing -----------------------------------------------------------------------------------
def write_demonstrations(path: str | os.PathLike, records: TensorDictBase, meta: DemoMeta) -> Path:
    """Publish ``records`` and ``meta`` as a dataset at ``path`` (which must not exist yet)."""
    path = Path(path)
    if path.exists():
        raise DatasetError(
            f"{path} already exists; accepted: a path that does not exist (delete it or choose another)"
        )
    _check_records(records, meta, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        records.memmap(prefix=tmp / DATA_DIR)
        write_json_atomic(tmp / META_FILE, asdict(meta))
        _fsync_tree(tmp)
        os.rename(tmp, path)  # the one step that makes the dataset visible
        fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _fsync_tree(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(Path(folder) / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(folder))


# -- loading -----------------------------------------------------------------------------------
def load_demonstrations(path: str | os.PathLike) -> Demonstrations:
    """The dataset at ``path``, its meta and records checked against each other."""
    path = Path(path)
    hint = (
        "record one with `python -m meeple.phases.bc.record env=<env> +policy._target_=<controller> "
        f"out={path}` or configure phase.data.record"
    )
    if not path.is_dir():
        raise DatasetError(f"{path}: no demonstration dataset there; {hint}")
    meta_file = path / META_FILE
    if not meta_file.is_file():
        raise DatasetError(
            f"{path}: no {META_FILE}, so not a complete demonstration dataset; {hint}"
        )
    meta = _read_meta(meta_file)
    try:
        records = TensorDict.load_memmap(path / DATA_DIR)
    except Exception as err:
        raise DatasetError(
            f"{path}/{DATA_DIR}: cannot load the records ({type(err).__name__}: {err})"
        ) from err
    _check_records(records, meta, str(path))
    return Demonstrations(path=path, records=records, meta=meta)


def _read_meta(meta_file: Path) -> DemoMeta:
    try:
        raw = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:
        raise DatasetError(f"{meta_file}: not readable JSON ({err})") from err
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise DatasetError(f"{meta_file}: format {found!r}; accepted: {FORMAT!r}")
    if raw.get("version") != VERSION:
        raise DatasetError(
            f"{meta_file}: format version {raw.get('version')!r}; accepted: {VERSION}"
        )
    fields = DemoMeta.__dataclass_fields__
    missing = sorted(
        name
        for name, f in fields.items()
        if name not in raw and f.default is MISSING and f.default_factory is MISSING
    )
    unknown = sorted(set(raw) - set(fields))
    if missing or unknown:
        raise DatasetError(
            f"{meta_file}: {'missing keys ' + ', '.join(missing) if missing else ''}"
            f"{'; ' if missing and unknown else ''}{'unknown keys ' + ', '.join(unknown) if unknown else ''}; "
            f"accepted keys: {', '.join(fields)}"
        )
    return DemoMeta(**raw)


def _check_records(records: TensorDictBase, meta: DemoMeta, where: str) -> None:
    """Keys, shapes, dtypes and counts of ``records`` agree with ``meta`` (and actions are legal)."""
    keys = set(records.keys())
    missing = [k for k in REQUIRED_KEYS if k not in keys]
    unknown = sorted(keys - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if missing or unknown:
        raise DatasetError(
            f"{where}: records {'lack ' + ', '.join(missing) if missing else ''}"
            f"{'; ' if missing and unknown else ''}{'have unknown keys ' + ', '.join(unknown) if unknown else ''}; "
            f"accepted: {', '.join(REQUIRED_KEYS)} (required), {', '.join(OPTIONAL_KEYS)} (optional)"
        )
    if sorted(keys) != sorted(meta.keys):
        raise DatasetError(
            f"{where}: records hold {sorted(keys)} but meta.json says {sorted(meta.keys)}"
        )
    n = records.batch_size[0] if records.batch_dims == 1 else None
    if n is None or n != meta.records or n == 0:
        raise DatasetError(
            f"{where}: records have batch size {list(records.batch_size)}, meta.json says {meta.records} "
            "records; accepted: one batch dimension of meta.records >= 1 records"
        )

    def expect(key: str, shape: tuple[int, ...], dtypes: tuple[torch.dtype, ...]) -> None:
        value = records[key]
        if tuple(value.shape) != shape or value.dtype not in dtypes:
            raise DatasetError(
                f"{where}: {key} has shape {list(value.shape)} and dtype {value.dtype}; accepted: shape "
                f"{list(shape)}, dtype {' or '.join(str(d) for d in dtypes)}"
            )

    expect(
        "observation",
        (n, *meta.observation_shape),
        (getattr(torch, meta.observation_dtype.split(".")[-1]),),
    )
    integer = (torch.int64,)
    expect("action", (n,), integer)
    expect("episode", (n,), integer)
    if "action_mask" in keys:
        expect("action_mask", (n, meta.num_actions), (torch.bool,))
    if "return" in keys:
        expect("return", (n,), (torch.float32,))
    action = torch.as_tensor(records["action"])
    if action.min() < 0 or action.max() >= meta.num_actions:
        raise DatasetError(
            f"{where}: actions range over [{int(action.min())}, {int(action.max())}]; accepted: 0..{meta.num_actions - 1}"
        )
    episode = torch.as_tensor(records["episode"])
    if episode.min() < 0 or episode.max() >= meta.episodes:
        raise DatasetError(
            f"{where}: episode ids beyond 0..{meta.episodes - 1} (meta.json: {meta.episodes} episodes)"
        )
    if "action_mask" in keys:
        legal = torch.as_tensor(records["action_mask"]).gather(1, action.unsqueeze(1)).squeeze(1)
        if not bool(legal.all()):
            raise DatasetError(
                f"{where}: {int((~legal).sum())} record(s) take an action their action_mask forbids; "
                "accepted: every recorded action legal"
            )


def episode_return_summary(returns: torch.Tensor) -> dict[str, float]:
    """Mean, min and max of undiscounted episode returns (for meta.json)."""
    returns = returns.double()
    return {
        "mean": float(returns.mean()),
        "min": float(returns.min()),
        "max": float(returns.max()),
        "std": float(returns.std()) if returns.numel() > 1 else 0.0,
    }
