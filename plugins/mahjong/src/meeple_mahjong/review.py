"""Review an MJAI game with a trained policy, as a browser page:
python -m meeple_mahjong.review LOG --checkpoint RUN_DIR_OR_PT [--seat N | --all-seats] [--out PAGE.html]

At each decision of the reviewed seat(s) the page shows the action the log played beside the
policy's top actions with their probabilities and the critic's value; a decision where the
policy's top action is not the one played is marked "disagree". The page's summary gives the
agreement (share of decisions where the policy's top action was played), per decision kind
(discard, riichi, call, win; see meeple_mahjong.replay) and overall, and the mean probability
the policy gave the played actions. Decisions with a single legal action are left out.

LOG is any MJAI log `meeple_mahjong.mjai` replays (ours, or a Tenhou / Mahjong Soul game
converted to MJAI), gzip or not; a log of several games reviews one (--game). A run directory
resolves to its newest stage's latest checkpoint, as for python -m meeple_mahjong.duplicate.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from meeple.errors import MeepleError

from .mjai import ReplayError, explain, read_lines, read_problem


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = _Parser(prog="python -m meeple_mahjong.review", description=__doc__.splitlines()[0])
    p.add_argument("log", type=Path, help="MJAI log (.mjson / .json / .jsonl, optionally gzip-compressed)")
    p.add_argument("--checkpoint", type=Path, required=True,
                   help="the policy's checkpoint (.pt) or run directory (its newest stage's latest.pt)")  # fmt: skip
    who = p.add_mutually_exclusive_group()
    who.add_argument("--seat", type=int, default=0, help="the seat to review, 0-3 (default 0)")
    who.add_argument("--all-seats", action="store_true", help="review the decisions of all four seats")
    p.add_argument("--game", type=int, default=0, help="which game of a log of several (0-based, default 0)")
    p.add_argument("--out", type=Path, default=None, help="the page to write (default: <log name>.review.html)")
    p.add_argument("--top", type=int, default=5, help="actions listed per decision (default 5)")
    p.add_argument("--east-only", action="store_true", help="the log's game is East-only (default East-South)")
    p.add_argument("--no-red", action="store_true", help="the log's game has no red fives")
    p.add_argument("--device", default="cpu", help="torch device of the policy (default cpu)")
    a = p.parse_args(argv)
    if not 0 <= a.seat <= 3:
        p.error(f"--seat {a.seat}: accepted: a seat number 0-3 (or --all-seats)")
    if a.top < 1:
        p.error(f"--top {a.top}: accepted: an integer >= 1")
    if a.game < 0:
        p.error(f"--game {a.game}: accepted: a game index >= 0")
    a.seats = [0, 1, 2, 3] if a.all_seats else [a.seat]
    if a.out is None:
        name = a.log.name
        for suffix in (".gz", ".mjson", ".jsonl", ".json"):
            name = name.removesuffix(suffix)
        a.out = Path(f"{name}.review.html")
    return a


def _fail(message: str) -> int:
    print(f"meeple_mahjong.review: error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    a = _args(argv)
    try:
        lines = read_lines(a.log)
    except (OSError, EOFError, UnicodeDecodeError) as e:
        return _fail(f"{a.log}: {read_problem(a.log, e)}")

    # torch and the policy only once the log is readable
    from meeple.viewer.page import write_replay

    from .policy import load_policy_heads
    from .replay import ReviewError, games_of, review_game
    from .viewer import renderer

    try:
        games = games_of(lines)
    except ReviewError as e:
        return _fail(f"{a.log}: {e}")
    if a.game >= len(games):
        return _fail(f"--game {a.game}: the log holds {len(games)} game(s); accepted: 0-{len(games) - 1}")
    game = games[a.game]
    try:
        heads, info = load_policy_heads(a.checkpoint, device=a.device)
    except MeepleError as e:
        return _fail(f"--checkpoint: {e}")
    rules = {"east_only": a.east_only, "red_fives": not a.no_red}
    seats = ", ".join(game.names[s] for s in a.seats)
    step = f" (step {info['global_step']})" if info.get("global_step") is not None else ""
    title = f"{a.log.name}: review of {seats} by {Path(info['file']).name}{step}"
    try:
        replay = review_game(game, heads, a.seats, rules=rules, title=title, top=a.top)
    except ReplayError as e:
        line, message = explain(e, game)
        if "east_only" in message and not a.east_only:
            message += "; --east-only reviews an East-only game"
        return _fail(f"{a.log}:{line}: {message}")
    replay.meta.update(log=str(a.log), game=a.game, checkpoint=info["file"], global_step=info["global_step"])
    draw = renderer()  # the plugin's own: no entry-point lookup needed
    try:
        path = write_replay(a.out, replay, with_renderer=draw)
    except OSError as e:
        return _fail(f"--out {a.out}: cannot write the page ({e.strerror or e})")
    if len(games) > 1:
        print(f"note: the log holds {len(games)} games; reviewed game {a.game} (--game picks another)")
    for key, value in replay.summary.items():
        print(f"{key.strip()}: {value}")
    print(f"wrote {path} ({len(replay.steps)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
