"""The auto-battler over the wire: layout, seeds, self-play rows, baseline players' placement."""

import json
import subprocess

import numpy as np
import pytest

from meeple.transport import node
from meeple.transport.client import connect
from meeple_autobattler import layout as L
from meeple_autobattler.backend import start_server
from meeple_autobattler.evaluate import opponent_act, place_of, play, report
from meeple_autobattler.policies import random_actions, scripted_actions


@pytest.fixture(scope="module")
def dist():
    return node.build()


def test_python_layout_matches_the_typescript_game(dist):
    done = subprocess.run(["node", str(dist / "games/autobattler/cli.js"), "layout"], capture_output=True, text=True, check=True)
    for name, value in json.loads(done.stdout).items():
        assert getattr(L, name) == value, name
    assert (L.OBS_SIZE, L.NUM_ACTIONS) == (612, 92)


def random_game_trace(client, seed: int, steps: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    client.reset(seed)
    records = client.observe(all_seats=True)
    trace = [np.array(records)]
    for _ in range(steps):
        mask = np.array(records["mask"]).astype(bool)
        n, seats, _ = mask.shape
        flat = mask.reshape(n * seats, -1)
        flat[~flat.any(axis=1), L.A_END] = True
        records = client.step_multi(random_actions(rng, flat).reshape(n, seats))
        trace.append(np.array(records))
    return trace


def test_seeds_fix_the_game_and_masks_are_honoured(dist):
    server = start_server(3)
    try:
        client = connect("socket", server.address)
        a = random_game_trace(client, seed=5, steps=120)
        b = random_game_trace(client, seed=5, steps=120)
        c = random_game_trace(client, seed=6, steps=120)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        assert any((x["obs"] != y["obs"]).any() for x, y in zip(a, c))
        first = a[0]
        assert first["obs"].shape == (3, 8, 612) and first["mask"].shape == (3, 8, 92)
        # every seat starts to move with 5 gold: end turn, reroll, XP and buys are legal
        assert first["mask"][:, :, [L.A_END, L.A_REROLL, L.A_XP]].all()
        assert first["obs"][0, 0, L.O_SELF + L.SELF_GOLD] * 50 == pytest.approx(5)
        # env i is seeded with seed + i: different shops in different envs
        assert (first["obs"][0, :, 320:400] != first["obs"][1, :, 320:400]).any()
        client.close()
    finally:
        server.stop()


def test_placement_rewards_cover_every_place_once(dist):
    server = start_server(2)
    try:
        client = connect("socket", server.address)
        client.reset(11)
        records = client.observe(all_seats=True)
        rng = np.random.default_rng(0)
        rewards = np.zeros((2, 8))
        ended = np.zeros(2, dtype=bool)
        for _ in range(2000):
            mask = np.array(records["mask"]).astype(bool).reshape(16, -1)
            mask[~mask.any(axis=1), 0] = True
            records = client.step_multi(random_actions(rng, mask).reshape(2, 8))
            # each env's first game only: a seat's reward is its place's, paid once
            rewards += np.where((rewards == 0) & ~ended[:, None], records["reward"], 0)
            done = records["done"].astype(bool)
            assert (done.all(axis=1) == done.any(axis=1)).all(), "a game ends for every seat at once"
            ended |= done[:, 0]
            if ended.all():
                break
        assert ended.all(), "random games end within 2000 steps"
        for env in range(2):
            assert sorted(place_of(rewards[env])) == list(range(1, 9))
        client.close()
    finally:
        server.stop()


def test_scripted_player_beats_random_players(dist):
    """The baseline the learned policy is measured against is itself far above random."""
    places = play(scripted_actions, opponent_act("random", 3), games=48, seed=3)
    rep = report(places, "random")
    assert rep.mean_place < 3.0 and rep.p_value < 0.01, rep
