"""Placement of a policy seated among 7 baseline players, over many games.

    python -m meeple_autobattler.evaluate <run dir | checkpoint> --opponent scripted --games 200

Game ``g`` seats the policy at seat ``g % 8`` and the opponent everywhere else; each game's first
episode counts. Places run 1 (best) .. 8; equal players average 4.5, so the report gives the mean
place with a 95% t-interval, the Wilcoxon signed-rank test against 4.5 (places are not normal, and
a policy that always wins has no variance for a t-test), and the first-place share with its
Wilson interval.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy import stats

from meeple.transport.client import connect
from meeple_autobattler import layout as L
from meeple_autobattler.backend import start_server
from meeple_autobattler.policies import random_actions, scripted_actions

Act = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (obs [rows, 612], mask [rows, 92]) -> actions
# (game, obs [612], mask [92], action): each decision of the policy's seat in a watched game
Watch = Callable[[int, np.ndarray, np.ndarray, int], None]
EQUAL_PLACE = (L.PLAYERS + 1) / 2


def place_of(reward: np.ndarray) -> np.ndarray:
    """The place a placement reward stands for: reward = (9 - 2 * place) / 7."""
    return np.rint((L.PLAYERS + 1 - (L.PLAYERS - 1) * reward) / 2).astype(int)


def opponent_act(name: str, seed: int) -> Act:
    if name == "random":
        rng = np.random.default_rng(seed)
        return lambda obs, mask: random_actions(rng, mask)
    if name == "scripted":
        return scripted_actions
    raise ValueError(f"opponent {name!r}; accepted: random, scripted")


def policy_act(policy: torch.nn.Module) -> Act:
    """Greedy actions of an exported policy (``forward(obs, mask) -> (logits, value)``)."""

    @torch.no_grad()
    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        out = policy(torch.from_numpy(obs), torch.from_numpy(mask).bool())
        logits = out[0] if isinstance(out, tuple) else out
        return logits.argmax(dim=-1).numpy().astype(np.int32)

    return act


def play(act: Act, opponent: Act, *, games: int, seed: int = 0, max_steps: int = 2000,
         watch: Watch | None = None, watched: int = 0) -> np.ndarray:
    """The policy's place in each of ``games`` games (one Node server, one env per game);
    ``watch`` sees every decision of the policy in the first ``watched`` games (replays)."""
    server = start_server(games)
    try:
        client = connect("socket", server.address)
        try:
            return _play(client, act, opponent, games, seed, max_steps, watch, watched)
        finally:
            client.close()
    finally:
        server.stop()


def _play(client, act: Act, opponent: Act, games: int, seed: int, max_steps: int,
          watch: Watch | None = None, watched: int = 0) -> np.ndarray:
    client.reset(seed)
    records = client.observe(all_seats=True)  # [games, seats]
    mine = np.zeros((games, L.PLAYERS), dtype=bool)
    mine[np.arange(games), np.arange(games) % L.PLAYERS] = True
    place = np.zeros(games, dtype=int)
    seat_rows = np.flatnonzero(mine.reshape(-1))  # the policy's row of each game
    for _ in range(max_steps):
        obs = np.array(records["obs"]).reshape(games * L.PLAYERS, -1)
        mask = np.array(records["mask"]).reshape(games * L.PLAYERS, -1).astype(bool)
        to_move = mask.any(axis=1)
        mask[~to_move, L.A_END] = True  # seats not to move: action 0, ignored
        flat = mine.reshape(-1)
        actions = np.zeros(len(flat), dtype=np.int32)
        actions[flat] = act(obs[flat], mask[flat])
        actions[~flat] = opponent(obs[~flat], mask[~flat])
        for game in range(min(watched, games) if watch is not None else 0):
            row = seat_rows[game]
            if to_move[row] and place[game] == 0:
                watch(game, obs[row], mask[row], int(actions[row]))
        records = client.step_multi(actions.reshape(games, L.PLAYERS))
        reward = np.array(records["reward"])[mine]
        newly = (place == 0) & (reward != 0)
        place[newly] = place_of(reward[newly])
        if (place > 0).all():
            return place
    raise RuntimeError(f"{int((place == 0).sum())} of {games} games did not place the policy in {max_steps} steps")


@dataclass
class PlacementReport:
    opponent: str
    games: int
    mean_place: float
    ci95: tuple[float, float]
    p_value: float  # two-sided Wilcoxon signed-rank test of place - 4.5
    first_share: float
    first_ci95: tuple[float, float]
    top4_share: float


def report(places: np.ndarray, opponent: str) -> PlacementReport:
    n, mean = len(places), float(places.mean())
    half = float(stats.t.ppf(0.975, n - 1) * places.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    firsts = int((places == 1).sum())
    wilson = stats.binomtest(firsts, n).proportion_ci(method="wilson")
    return PlacementReport(
        opponent, n, mean, (mean - half, mean + half),
        float(stats.wilcoxon(places - EQUAL_PLACE).pvalue),
        firsts / n, (float(wilson.low), float(wilson.high)), float((places <= 4).mean()),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meeple_autobattler.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("policy", help="a run directory or checkpoint, or 'random' / 'scripted'")
    parser.add_argument("--opponent", default="scripted", choices=["random", "scripted"])
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.policy in ("random", "scripted"):
        act = opponent_act(args.policy, args.seed + 1)
    else:
        from meeple.export.policy import load_policy

        act = policy_act(load_policy(args.policy).policy)
    places = play(act, opponent_act(args.opponent, args.seed), games=args.games, seed=args.seed)
    rep = report(places, args.opponent)
    if args.json:
        print(json.dumps(asdict(rep)))
    else:
        print(f"{args.policy} vs 7 x {rep.opponent}, {rep.games} games: mean place {rep.mean_place:.2f} "
              f"[{rep.ci95[0]:.2f}, {rep.ci95[1]:.2f}] (4.5 = equal; Wilcoxon p = {rep.p_value:.2g}), "
              f"first {rep.first_share:.1%} [{rep.first_ci95[0]:.1%}, {rep.first_ci95[1]:.1%}], "
              f"top four {rep.top4_share:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
