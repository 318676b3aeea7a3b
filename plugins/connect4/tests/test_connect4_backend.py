"""The Connect Four backend: rules from meeple_native, the self-play view, auto-reset, masks."""

import numpy as np
import pytest
import torch
from torchrl.envs.utils import check_env_specs

from meeple.plugins.registry import load_backend
from meeple_connect4 import Connect4ArrayEnv, backend
from meeple_native import Connect4


def records(env: Connect4ArrayEnv, seats: int = 1) -> np.ndarray:
    n = env.spaces.num_envs
    return (
        env.spaces.new_records(n * seats).reshape(n, seats)
        if seats > 1
        else env.spaces.new_records(n)
    )


def test_entry_point_and_torchrl_env():
    assert load_backend("connect4") is backend
    env = backend.make_env({"backend": "connect4"}, num_envs=3)
    check_env_specs(env)
    td = env.reset()
    assert td["observation"].shape == (3, 3, 6, 7) and td["action_mask"].all()


def test_step_plays_for_the_side_to_move_and_auto_resets_after_a_win():
    env = Connect4ArrayEnv(1)
    out = records(env)
    env.reset(None, out)
    for move, mover in zip([3, 4, 3, 4, 3, 4], [0, 1, 0, 1, 0, 1]):
        env.step(np.array([move], np.int32), out)
        assert out["info_to_play"][0] == 1 - mover and out["done"][0] == 0
    expected = Connect4.from_moves("454545")
    planes = np.empty((3, 6, 7), np.float32)
    expected.encode(planes)
    np.testing.assert_array_equal(out["obs"][0], planes)
    env.step(np.array([3], np.int32), out)  # four in column 3 for the first player
    assert out["done"][0] == 1 and out["reward"][0] == 1.0 and out["info_winner"][0] == 0
    assert out["obs"][0][:2].sum() == 0 and out["mask"][0].all() and out["info_moves"][0] == 0
    with pytest.raises(ValueError):
        Connect4ArrayEnv(1).step(np.array([9], np.int32), records(Connect4ArrayEnv(1)))


def test_step_multi_gives_each_seat_its_view_and_reward():
    env = Connect4ArrayEnv(1)
    out = records(env, seats=2)
    env.reset(None, out[:, 0])
    for move in [3, 4, 3, 4, 3, 4]:
        actions = np.full((1, 2), move, np.int32)
        env.step_multi(actions, out)
        seat = int(out[0, 0]["info_to_play"])
        assert out[0, seat]["mask"].any() and not out[0, 1 - seat]["mask"].any()
        np.testing.assert_array_equal(out[0, 0]["obs"][0], out[0, 1]["obs"][1])  # own stones swap
    env.step_multi(np.array([[3, 0]], np.int32), out)
    assert out["reward"][0].tolist() == [1.0, -1.0] and out["done"][0].tolist() == [1, 1]


def test_random_games_match_the_native_rules():
    rng = np.random.default_rng(0)
    env = Connect4ArrayEnv(4)
    out = records(env)
    env.reset(None, out)
    games = [Connect4() for _ in range(4)]
    for _ in range(300):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in out["mask"]], np.int32)
        env.step(actions, out)
        for i, a in enumerate(actions):
            games[i].play(int(a))
            if games[i].is_terminal():
                assert out["done"][i] == 1
                games[i] = Connect4()
            planes = np.empty((3, 6, 7), np.float32)
            games[i].encode(planes)
            np.testing.assert_array_equal(out["obs"][i], planes)
            assert out["mask"][i].tolist() == [int(games[i].is_legal(c)) for c in range(7)]
    assert torch.is_tensor(torch.from_numpy(out["obs"]))
