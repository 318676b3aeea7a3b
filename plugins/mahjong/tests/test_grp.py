"""The global reward predictor (meeple_mahjong.grp) and the env's per-hand rewards from it."""

from __future__ import annotations

import json

import pytest
import torch

from meeple.errors import ConfigError
from meeple_mahjong import grp
from meeple_mahjong.batch_env import MahjongEnv
from meeple_mahjong.mjai import placements, write_log

RANK_REWARD = [0.9, 0.45, 0.0, -1.35]


@pytest.fixture(scope="module")
def selfplay() -> grp.HandStarts:
    return grp.from_selfplay(120, seed=7)  # ~5 s


@pytest.fixture(scope="module")
def random_grp(tmp_path_factory) -> str:
    torch.manual_seed(3)
    path = tmp_path_factory.mktemp("grp") / "grp.pt"
    return str(grp.save(path, grp.GlobalRewardPredictor(16), {}, "untrained"))


def test_placements_break_ties_by_seat() -> None:
    assert placements([25000, 30000, 25000, 20000]) == [1, 0, 2, 3]
    assert placements([25000] * 4) == [0, 1, 2, 3]


def test_features_read_the_round_and_rotate_scores_to_the_seat() -> None:
    x = grp.hand_features(5, 2, 1, [30000, 20000, 25000, 25000], seat=1)
    assert x[: grp.ROUNDS].index(1.0) == 5 and sum(x[: grp.ROUNDS]) == 1.0
    assert x[grp.ROUNDS : grp.ROUNDS + 2] == [0.5, 0.25]
    assert x[grp.ROUNDS + 2 : grp.ROUNDS + 6] == [-0.5, 0.0, 0.0, 0.5]  # own, right, across, left
    assert x[grp.ROUNDS + 6 :] == [0.0, 1.0, 0.0, 0.0]
    rows, final = grp._game_rows([
        {"type": "start_kyoku", "bakaze": "S", "kyoku": 2, "honba": 1, "kyotaku": 0, "scores": [25000] * 4},
        {"type": "end_game", "scores": [1, 2, 3, 4]},
    ])  # fmt: skip
    assert rows == [(5, 1, 0, [25000] * 4)] and final == [1, 2, 3, 4]
    # a hand start without four integer scores makes the game unusable, not an exception
    assert grp._game_rows([{"type": "start_kyoku", "scores": [1, 2]}])[1] is None
    assert grp._game_rows([{"type": "start_kyoku", "bakaze": "X", "scores": [1] * 4}])[1] is None


def test_self_play_rows_match_the_games(selfplay) -> None:
    assert selfplay.games == 120 and selfplay.skipped == 0
    assert len(selfplay) % 4 == 0 and selfplay.x.shape == (len(selfplay), grp.FEATURES)
    # every hand start holds each placement once over its four seats
    ranks = selfplay.rank.view(-1, 4).sort(1).values
    assert torch.equal(ranks, torch.arange(4).expand_as(ranks))
    # the standing baseline reads each seat's placement at the hand start back from its features
    x = selfplay.x.view(-1, 4, grp.FEATURES)[:200]  # 200 hand starts, rows in seat order
    standing = grp._standing(selfplay.x[: 200 * 4]).view(-1, 4)
    for hand, got in zip(x, standing):
        scores = [round(float(v) * 10000 + 25000) for v in hand[0, grp.ROUNDS + 2 : grp.ROUNDS + 6]]
        assert got.tolist() == placements(scores)


def test_logs_and_self_play_read_the_same_games(tmp_path) -> None:
    from meeple_native import mahjong as _mj

    g = _mj.Game()
    for i in range(3):
        g.reset(7, i)
        _mj.play_bots(g, ["rule"] * 4, i)
        write_log(tmp_path / f"game_{i:05d}.mjson", g.events())
    (tmp_path / "summary.json").write_text("{}")  # not a log: left out
    logs, played = grp.from_logs([tmp_path]), grp.from_selfplay(3, seed=7)
    assert torch.equal(logs.x, played.x) and torch.equal(logs.rank, played.rank)


def test_grp_beats_uniform_and_knows_a_clear_leader(selfplay) -> None:
    model, metrics = grp.train(selfplay, epochs=15, hidden=32, val_fraction=0.2, seed=0)
    val = metrics["val"]
    assert val["log_loss"] < val["uniform_log_loss"] - 0.1
    # South 4 (the last hand), 30,000 points ahead of everyone: first with high probability
    lead = torch.tensor([grp.hand_features(7, 0, 0, [50000, 20000, 15000, 15000], 0)])
    trail = torch.tensor([grp.hand_features(7, 0, 0, [5000, 35000, 30000, 30000], 0)])
    p_lead, p_trail = torch.softmax(model(lead), -1)[0], torch.softmax(model(trail), -1)[0]
    assert p_lead[0] > 0.6 and p_trail[3] > 0.6


def test_hand_rewards_add_up_to_the_rank_reward_minus_the_start_potential(random_grp) -> None:
    """Potential-based: whatever the GRP says, a game's rewards sum to rank_reward[rank] - Phi0."""
    pot = grp.HandPotential.load(random_grp, RANK_REWARD)
    torch.manual_seed(0)
    env = MahjongEnv(8, learner_seats=[0, 2], opponents="rule", hand_reward=random_grp)
    seat = env.reset()["seat"].squeeze(-1)
    phi0 = pot(torch.tensor([grp.hand_features(0, 0, 0, [25000] * 4, int(s)) for s in seat]))
    total, ends, steps, rewarded = torch.zeros(8), 0, 0, 0
    td = env.reset()
    while ends < 8:
        td = env.rand_action(td)
        out, td = env.step_and_maybe_reset(td)
        reward, done = out["next", "reward"].squeeze(-1), out["next", "done"].squeeze(-1)
        total += reward
        steps, rewarded = steps + reward.numel(), rewarded + int((reward != 0).sum())
        for k in torch.nonzero(done).flatten().tolist():
            expected = RANK_REWARD[int(out["next", "rank"][k])] - phi0[k]
            assert total[k] == pytest.approx(float(expected), abs=1e-5)
            total[k], ends = 0.0, ends + 1
    assert 0 < rewarded < steps / 5  # only where a hand ends, not at every decision


def test_without_hand_reward_the_score_term_stays() -> None:
    env = MahjongEnv(2, opponents="rule")
    assert env._hand_rewards is None and env._sim_args["score_scale"] == 1e-4


def test_bad_checkpoints_get_one_clear_line(tmp_path, random_grp) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot be read"):
        grp.load(bad)
    torch.save({"kind": "something else"}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="is not a GRP"):
        grp.load(tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="does not exist"):
        MahjongEnv(2, hand_reward=str(tmp_path / "missing.pt"))


def test_cli_trains_and_writes_a_checkpoint(tmp_path, capsys) -> None:
    out = tmp_path / "g.pt"
    assert grp.main(["--selfplay", "12", "--epochs", "2", "--hidden", "8", "--out", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["games"] == 12 and summary["val"]["rows"] > 0
    assert isinstance(grp.load(out), grp.GlobalRewardPredictor)
    assert grp.main(["--logs", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
