"""Global reward predictor (GRP): a seat's final placement from the table at the start of a hand.

A game's only true reward is its final placement, so PPO's per-decision signal is the noise of
~10 hands. The GRP turns it into per-hand rewards, as Suphx and Mortal do: the potential of a
seat at the start of a hand is the expected rank reward, Phi = sum_r P(rank r | hand start) *
rank_reward[r], and the reward of a hand is the change of Phi over it (the env's
``hand_reward`` option, `meeple_mahjong.batch_env`). Phi of a finished game is its rank reward,
so a game's rewards still sum to its rank reward minus Phi at its start (the same for every
game of a seat): the objective is unchanged, only its credit moves to the hands that earn it.

Inputs (`hand_features`): the round (E1..S4 and the extra West round, one-hot), honba and
riichi sticks, the four scores seen from the seat (own, right, across, left), and the seat
(ties on points go to the lower seat; seat 0 deals first). Output: logits over the seat's
four placements.

Data: the ``start_kyoku`` and ``end_game`` events of MJAI logs (a corpus's ``logs/``, Tenhou
logs converted by the corpus pipeline) or rule-bot games played here (``--selfplay``).

    python -m meeple_mahjong.grp --selfplay 20000 --out outputs/grp/grp.pt
    python -m meeple_mahjong.grp --logs outputs/corpora/<corpus>/logs --out outputs/grp/grp.pt

docs/mahjong_grp.md has the measured fit and how the env uses it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from meeple.cli_progress import task_progress
from meeple.errors import ConfigError
from meeple_native import mahjong as _mj

from .mjai import placements, read_lines, split_games

ROUNDS = 12  # E1-E4, S1-S4, W1-W4 (a hanchan goes into West when nobody reaches the return points)
FEATURES = ROUNDS + 2 + 4 + 4
_WINDS = {"E": 0, "S": 1, "W": 2, "N": 3}
FORMAT = 1  # checkpoint layout


def hand_features(
    kyoku: int, honba: int, sticks: int, scores: Sequence[int], seat: int
) -> list[float]:
    """The GRP's input for ``seat`` (``kyoku``: the round index, 0 = East 1, as `Game.kyoku`)."""
    x = [0.0] * FEATURES
    x[min(max(kyoku, 0), ROUNDS - 1)] = 1.0
    x[ROUNDS] = min(honba, 8) / 4.0
    x[ROUNDS + 1] = min(sticks, 8) / 4.0
    for k in range(4):  # own, right (next to act), across, left
        x[ROUNDS + 2 + k] = (scores[(seat + k) % 4] - 25000) / 10000.0
    x[ROUNDS + 6 + seat] = 1.0
    return x


@dataclass
class HandStarts:
    """One row per seat per hand start: the features, the seat's final placement, its game."""

    x: torch.Tensor  # [N, FEATURES] float32
    rank: torch.Tensor  # [N] int64
    game: torch.Tensor  # [N] int64, for splitting by game
    skipped: int = 0  # games left out (no end_game: the log stopped mid-game)

    def __len__(self) -> int:
        return self.rank.numel()

    @property
    def games(self) -> int:
        return int(self.game.unique().numel()) if len(self) else 0


class _Rows:
    def __init__(self) -> None:
        self.x: list[list[float]] = []
        self.rank: list[int] = []
        self.game: list[int] = []
        self.games = 0
        self.skipped = 0

    def add_game(
        self, starts: list[tuple[int, int, int, list[int]]], final: Sequence[int] | None
    ) -> None:
        if final is None or not starts:
            self.skipped += 1
            return
        ranks = placements(final)
        for kyoku, honba, sticks, scores in starts:
            for seat in range(4):
                self.x.append(hand_features(kyoku, honba, sticks, scores, seat))
                self.rank.append(ranks[seat])
                self.game.append(self.games)
        self.games += 1

    def done(self) -> HandStarts:
        return HandStarts(
            torch.tensor(self.x, dtype=torch.float32).reshape(-1, FEATURES),
            torch.tensor(self.rank, dtype=torch.int64),
            torch.tensor(self.game, dtype=torch.int64),
            self.skipped,
        )


def _scores(v: object) -> list[int] | None:
    if isinstance(v, list) and len(v) == 4 and all(isinstance(x, int) for x in v):
        return list(v)
    return None


def _game_rows(
    events: Iterable[dict],
) -> tuple[list[tuple[int, int, int, list[int]]], list[int] | None]:
    """A game's hand starts and final scores; (.., None) when the game cannot be used (no
    end_game, or a start_kyoku without four integer scores)."""
    starts, final = [], None
    for ev in events:
        kind = ev.get("type")
        if kind == "start_kyoku":
            scores = _scores(ev.get("scores"))
            try:
                wind = _WINDS[ev.get("bakaze", "E")]
                kyoku, honba, sticks = (
                    int(ev.get("kyoku", 1)),
                    int(ev.get("honba", 0)),
                    int(ev.get("kyotaku", 0)),
                )
            except (KeyError, TypeError, ValueError):
                scores = None
            if scores is None:
                return starts, None
            starts.append((4 * wind + kyoku - 1, honba, sticks, scores))
        elif kind == "end_game":
            final = _scores(ev.get("scores"))
    return starts, final


def from_logs(paths: Iterable[str | Path]) -> HandStarts:
    """Hand starts of every complete game in these MJAI logs (files, or folders of .mjson[.gz])."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.name.endswith((".mjson", ".mjson.gz")))
        elif p.exists():
            files.append(p)
        else:
            raise ConfigError(
                f"GRP logs: {p} does not exist; accepted: MJAI log files or folders of them"
            )
    if not files:
        raise ConfigError(f"GRP logs: no .mjson(.gz) files in {[str(p) for p in paths]}")
    rows = _Rows()
    with task_progress() as bar:
        task = bar.add_task("GRP: reading logs", total=len(files))
        for f in files:
            for game in split_games(read_lines(f)):
                rows.add_game(*_game_rows(ev for _, ev, _ in game.events))
            bar.advance(task)
    return rows.done()


def from_selfplay(
    games: int, seed: int, bots: Sequence[str] = ("rule",) * 4, *, east_only: bool = False
) -> HandStarts:
    """Hand starts of ``games`` native bot games (session ``seed``), played here."""
    g = _mj.Game(east_only=east_only)
    rows = _Rows()
    with task_progress() as bar:
        task = bar.add_task("GRP: self-play", total=games)
        for i in range(games):
            g.reset(seed, i)
            _mj.play_bots(g, list(bots), i)
            rows.add_game(*_game_rows(json.loads(e) for e in g.events()))
            bar.advance(task)
    return rows.done()


def concat(parts: Sequence[HandStarts]) -> HandStarts:
    """One data set; game ids renumbered so that games stay apart (the split is by game)."""
    games, offset = [], 0
    for d in parts:
        games.append(torch.unique(d.game, return_inverse=True)[1] + offset)
        offset += d.games
    return HandStarts(
        torch.cat([d.x for d in parts]),
        torch.cat([d.rank for d in parts]),
        torch.cat(games),
        sum(d.skipped for d in parts),
    )


class GlobalRewardPredictor(nn.Module):
    """Hand-start features -> logits of the seat's final placement (0 = first)."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.hidden = hidden
        self.net = nn.Sequential(
            nn.Linear(FEATURES, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, 4),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def standing_table(data: HandStarts, smoothing: float = 1.0) -> torch.Tensor:
    """The baseline the GRP must beat: P(final placement | placement now, round), counted.
    [ROUNDS, 4 (now), 4 (final)]."""
    now = _standing(data.x)
    rnd = data.x[:, :ROUNDS].argmax(1)
    counts = torch.full((ROUNDS, 4, 4), smoothing)
    counts.index_put_((rnd, now, data.rank), torch.ones(len(data)), accumulate=True)
    return counts / counts.sum(-1, keepdim=True)


def _standing(x: torch.Tensor) -> torch.Tensor:
    """The seat's placement at the hand start (ties to the lower seat), from the features."""
    rel = x[:, ROUNDS + 2 : ROUNDS + 6]  # own, right, across, left
    seat = x[:, ROUNDS + 6 :].argmax(1)
    own = rel[:, :1]
    other_seat = (seat.unsqueeze(1) + torch.arange(1, 4)) % 4
    ahead = (rel[:, 1:] > own) | ((rel[:, 1:] == own) & (other_seat < seat.unsqueeze(1)))
    return ahead.sum(1)


def split(data: HandStarts, val_fraction: float) -> tuple[HandStarts, HandStarts]:
    """By game: the last ``val_fraction`` of the games are held out."""
    cut = int(round(data.games * (1.0 - val_fraction)))
    keep = data.game < cut
    return (
        HandStarts(data.x[keep], data.rank[keep], data.game[keep]),
        HandStarts(data.x[~keep], data.rank[~keep], data.game[~keep]),
    )


def evaluate(
    model: GlobalRewardPredictor, table: torch.Tensor, data: HandStarts
) -> dict[str, float]:
    """Log loss (nats) and accuracy of the GRP and of the standing table on ``data``."""
    with torch.no_grad():
        logp = torch.log_softmax(model(data.x), -1)
    rnd = data.x[:, :ROUNDS].argmax(1)
    base = table[rnd, _standing(data.x)].log()
    idx = torch.arange(len(data))
    # the first hand of a game (East 1, no honba, everyone on 25,000): only the seat differs
    first = (rnd == 0) & (data.x[:, ROUNDS : ROUNDS + 6].abs().sum(1) == 0)
    return {
        "rows": float(len(data)),
        "log_loss": float(-logp[idx, data.rank].mean()),
        "accuracy": float((logp.argmax(1) == data.rank).float().mean()),
        "standing_log_loss": float(-base[idx, data.rank].mean()),
        "standing_accuracy": float((base.argmax(1) == data.rank).float().mean()),
        "uniform_log_loss": math.log(4.0),
        "first_hand_max_prob": float(logp[first].exp().max())
        if bool(first.any())
        else float("nan"),
    }


def train(
    data: HandStarts,
    *,
    epochs: int = 30,
    hidden: int = 64,
    lr: float = 3e-3,
    batch_size: int = 1024,
    val_fraction: float = 0.1,
    seed: int = 0,
) -> tuple[GlobalRewardPredictor, dict[str, dict[str, float]]]:
    """Fit a GRP (Adam, cross-entropy) on all but the held-out games; metrics on both parts."""
    if data.games < 2:
        raise ConfigError(f"GRP training needs at least 2 complete games, got {data.games}")
    tr, va = split(data, val_fraction)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = GlobalRewardPredictor(hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, epochs))
    with task_progress() as bar:
        task = bar.add_task("GRP: training", total=epochs)
        for _ in range(epochs):
            perm = torch.randperm(len(tr), generator=gen)
            for i in range(0, len(tr), batch_size):
                b = perm[i : i + batch_size]
                loss = nn.functional.cross_entropy(model(tr.x[b]), tr.rank[b])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            sched.step()
            bar.advance(task)
    model.eval()
    table = standing_table(tr)
    metrics = {"train": evaluate(model, table, tr), "val": evaluate(model, table, va)}
    metrics["train"]["games"], metrics["val"]["games"] = float(tr.games), float(va.games)
    return model, metrics


def save(path: str | Path, model: GlobalRewardPredictor, metrics: dict, source: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": FORMAT, "kind": "mahjong_grp", "hidden": model.hidden, "features": FEATURES,
                "state_dict": model.state_dict(), "metrics": metrics, "source": source}, tmp)  # fmt: skip
    tmp.replace(path)  # never a half-written checkpoint under the real name
    return path


def load(path: str | Path) -> GlobalRewardPredictor:
    """A GRP saved by `save`; one clear line when the file is not one."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"GRP checkpoint {path} does not exist; make one with python -m meeple_mahjong.grp"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file gets the same one line
        raise ConfigError(
            f"GRP checkpoint {path} cannot be read ({type(e).__name__}: {e})"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("kind") != "mahjong_grp":
        raise ConfigError(
            f"GRP checkpoint {path} is not a GRP (python -m meeple_mahjong.grp writes them)"
        )
    if ckpt.get("format") != FORMAT or ckpt.get("features") != FEATURES:
        raise ConfigError(
            f"GRP checkpoint {path} has format {ckpt.get('format')} with {ckpt.get('features')} features; "
            f"accepted: format {FORMAT} with {FEATURES} (retrain it with python -m meeple_mahjong.grp)"
        )
    model = GlobalRewardPredictor(int(ckpt["hidden"]))
    model.load_state_dict(ckpt["state_dict"])
    return model.eval()


class HandPotential:
    """Phi(hand start) = E[rank_reward] under the GRP: the env's per-hand reward is its change."""

    def __init__(self, model: GlobalRewardPredictor, rank_reward: Sequence[float]) -> None:
        self.model = model.eval()
        self.rank_reward = torch.tensor([float(r) for r in rank_reward])

    @classmethod
    def load(cls, path: str | Path, rank_reward: Sequence[float]) -> HandPotential:
        return cls(load(path), rank_reward)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.softmax(self.model(x), -1) @ self.rank_reward


def _args(argv):
    p = argparse.ArgumentParser(
        prog="python -m meeple_mahjong.grp", description=__doc__.splitlines()[0]
    )
    p.add_argument("--logs", nargs="+", help="MJAI log files or folders of them")
    p.add_argument(
        "--selfplay", type=int, help="also play this many rule-bot games here (session --seed)"
    )
    p.add_argument("--seed", type=int, default=0, help="self-play session seed and training seed")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--val-fraction", type=float, default=0.1, help="games held out for the metrics")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads (the model is tiny: 1 is fastest)",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="checkpoint to write (e.g. outputs/grp/grp.pt)"
    )
    a = p.parse_args(argv)
    if not a.logs and a.selfplay is None:
        p.error("give --logs, --selfplay or both")
    if a.selfplay is not None and a.selfplay < 2:
        p.error(f"--selfplay must be >= 2 games, got {a.selfplay}")
    if not 0.0 < a.val_fraction < 1.0:
        p.error(f"--val-fraction must be in (0, 1), got {a.val_fraction}")
    return a


def main(argv=None) -> int:
    a = _args(argv)
    torch.set_num_threads(a.torch_threads)
    t0 = time.perf_counter()
    try:
        parts, sources = [], []
        if a.logs:
            parts.append(from_logs(a.logs))
            sources.append("logs: " + " ".join(a.logs))
        if a.selfplay:
            parts.append(from_selfplay(a.selfplay, a.seed))
            sources.append(f"selfplay: {a.selfplay} rule-bot games, seed {a.seed}")
        data, source = concat(parts), "; ".join(sources)
        model, metrics = train(
            data, epochs=a.epochs, hidden=a.hidden, val_fraction=a.val_fraction, seed=a.seed
        )
    except ConfigError as e:
        print(f"meeple_mahjong.grp: {e}", file=sys.stderr)
        return 2
    save(a.out, model, metrics, source)
    summary = {"out": str(a.out), "source": source, "games": data.games, "skipped_games": data.skipped,
               "rows": len(data), "seconds": round(time.perf_counter() - t0, 1), **metrics}  # fmt: skip
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
