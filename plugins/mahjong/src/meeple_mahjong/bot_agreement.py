"""Where a policy's choices differ from the rule bot's in its own seat:
python -m meeple_mahjong.bot_agreement --policy RUN_OR_PT [--tables 64 --steps 200 --seed 7].

The policy plays greedily in seat 0 against three rule bots (`probe_tables.ProbeTables`). At each of
its decisions with a choice the rule bot's choice in that seat is asked over ``--streams`` random
streams (the bot breaks ties between equally good tiles at random): the policy agrees with the bot
on stream 0, or up to its tie-breaks (the policy's choice is one of the bot's). Per kind of decision
(one offering a call; else riichi; else a win; else a plain discard). The plain discards that
differ beyond the tie-breaks are sorted by what they do to the hand, against the bot's discard:
taken under an opponent's riichi (the bot folds there), raising the hand's shanten, or keeping it
with fewer, as many or more advancing tiles (kinds whose draw lowers the shanten, copies the hand
does not hold; the bot counts the visible tiles too). Phase 1 clones this bot: the sort says which
of the bot's computations the clone misses (docs/rl_diagnostics.md section t).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch

from meeple.checkpoint.actor import checkpoint_file
from meeple.cli.parsing import OneLineParser
from meeple.cli_progress import task_progress
from meeple.errors import MeepleError
from meeple.jsonio import write_json_atomic
from meeple.nets.policy_fn import logits_fn
from meeple_native import mahjong as _mj

from .policy import load_policy_actor
from .probe_tables import ProbeTables
from .specs import opponents_in_riichi, rows_offering

KINDS = ("call", "riichi", "win", "discard")  # a decision's kind: the first of these it offers
SORTS = ("under riichi", "shanten raised", "shanten lowered", "fewer advancing tiles",
         "as many advancing tiles", "more advancing tiles")  # fmt: skip


def decision_kind(mask: torch.Tensor) -> str:
    """The first of `KINDS` that the legal actions ``mask`` [A] offer ("discard" otherwise)."""
    for kind in KINDS[:-1]:
        if rows_offering(mask, (kind,)):
            return kind
    return "discard"


def after_discard(counts: Sequence[int], kind: int) -> tuple[int, int]:
    """The concealed hand ``counts`` (34 tile kinds) without one ``kind``: its shanten and its
    advancing tiles (copies, not in the hand, of the kinds whose draw lowers the shanten)."""
    c = list(counts)
    c[kind] -= 1
    shanten = _mj.shanten(c)
    advancing = 0
    for k in range(34):
        if c[k] < 4:
            c[k] += 1
            if _mj.shanten(c) < shanten:
                advancing += 4 - (c[k] - 1)
            c[k] -= 1
    return shanten, advancing


def sort_difference(game: Any, seat: int, mine: int, bots: int, under_riichi: bool) -> str:
    """One of `SORTS`: what discarding action ``mine`` does to the hand against the bot's ``bots``."""
    if under_riichi:
        return "under riichi"
    counts = [0] * 34
    for tile in game.hand(seat):
        counts[tile // 4] += 1
    (s1, a1), (s2, a2) = (after_discard(counts, _mj.action_from_index(game, seat, i).tile // 4) for i in (mine, bots))
    if s1 != s2:
        return "shanten raised" if s1 > s2 else "shanten lowered"
    return "fewer advancing tiles" if a1 < a2 else "more advancing tiles" if a1 > a2 else "as many advancing tiles"


def measure(policy: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], play: ProbeTables, steps: int, *,
            bot: str = "rule", streams: int = 8, on_progress=None) -> dict[str, Any]:  # fmt: skip
    """Plays ``policy`` (a logits fn over the active tables' rows, greedy) on ``play`` for
    ``steps`` steps; returns per kind ``decisions``, ``agree`` (the bot's stream 0), ``agree_ties``
    (one of its ``streams`` choices) and ``bot_ties`` (its choice depends on the stream), and the
    plain discards' ``differences`` sorted by `SORTS` (counts; ``plain_discards`` their total)."""
    kinds = {k: Counter() for k in KINDS}
    sorts: Counter = Counter()
    with torch.no_grad():
        for step in range(steps):
            rows, mask, actions = play.deciding()
            if len(rows):
                actions[rows] = policy(play.obs[rows], mask).argmax(-1)
                riichi = opponents_in_riichi(play.obs[rows]).any(-1)
                for i in torch.nonzero(mask.sum(-1) > 1).squeeze(-1).tolist():
                    t = int(rows[i])
                    game, mine = play.sim.game(t), int(actions[t])
                    choices = [_mj.action_index(_mj.bot_action(game, 0, bot, s), True) for s in range(streams)]
                    kind = decision_kind(mask[i])
                    c = kinds[kind]
                    c["decisions"] += 1
                    c["agree"] += mine == choices[0]
                    c["agree_ties"] += mine in choices
                    c["bot_ties"] += len(set(choices)) > 1
                    if kind == "discard" and not rows_offering(mask[i], ("pass", "other")):
                        sorts["plain_discards"] += 1
                        if mine not in choices:
                            sorts[sort_difference(game, 0, mine, choices[0], bool(riichi[i]))] += 1
            play.step(actions)
            if on_progress is not None:
                on_progress(step + 1)
    out: dict[str, Any] = {"kinds": {}, "plain_discards": sorts.pop("plain_discards", 0),
                           "differences": {s: sorts[s] for s in SORTS}}  # fmt: skip
    for kind, c in kinds.items():
        if c["decisions"]:
            n = c["decisions"]
            out["kinds"][kind] = {"decisions": n, **{k: c[k] / n for k in ("agree", "agree_ties", "bot_ties")}}
    return out


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog="python -m meeple_mahjong.bot_agreement", description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", required=True, help="a checkpoint (.pt) or run directory")
    p.add_argument("--tables", type=int, default=64)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=7, help="session seed of the walls")
    p.add_argument("--streams", type=int, default=8, help="the bot's random streams asked at each decision")
    p.add_argument("--torch-threads", type=int, default=1)
    p.add_argument("--out", default=None, help="write the summary JSON here")
    a = p.parse_args(argv)
    if min(a.tables, a.steps, a.streams, a.torch_threads) < 1 or a.seed < 0:
        p.error("--tables, --steps, --streams and --torch-threads must be >= 1 and --seed >= 0")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    torch.set_num_threads(a.torch_threads)
    try:
        actor, _ = load_policy_actor(checkpoint_file(a.policy))
        with task_progress() as bar:
            task = bar.add_task("bot agreement: steps", total=a.steps)
            s = measure(logits_fn(actor), ProbeTables(a.tables, a.seed), a.steps, streams=a.streams,
                        on_progress=lambda done: bar.update(task, completed=done))  # fmt: skip
    except MeepleError as err:
        print(f"meeple: error: {err}", file=sys.stderr)
        return 2
    print(f"{a.policy} against three rule bots, seat 0, {a.tables} tables x {a.steps} steps, seed {a.seed}:")
    for kind, k in s["kinds"].items():
        print(f"  {kind:8s} {k['decisions']:6d} decisions: agrees with the bot {k['agree']:.3f}, up to its "
              f"tie-breaks {k['agree_ties']:.3f} (the bot breaks a tie at {k['bot_ties']:.3f})")  # fmt: skip
    n = max(1, s["plain_discards"])
    print(f"  plain discards that differ beyond the tie-breaks, of {s['plain_discards']}:")
    for name, v in s["differences"].items():
        print(f"    {name:26s} {v:6d} ({v / n:.3f})")
    if a.out:
        write_json_atomic(a.out, {"policy": str(a.policy), "tables": a.tables, "steps": a.steps, "seed": a.seed, **s})
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
