"""Where a policy differs from the rule bot (meeple_mahjong.bot_agreement): the bot agrees with
itself everywhere, a policy that discards the lowest tile differs and raises shanten, a known
hand's discards are sorted right, and the command writes its summary."""

import json

import torch

from meeple_mahjong.bot_agreement import SORTS, after_discard, main, measure
from meeple_mahjong.probe_tables import ProbeTables
from meeple_native import mahjong as mj


def _hand(*kinds):
    counts = [0] * 34
    for k in kinds:
        counts[k] += 1
    return counts


def test_a_known_hands_discards_are_priced_by_shanten_and_advancing_tiles():
    # 111m 222p 333s 444z 5z 6z: dropping either lone honour waits on three copies of the other
    hand = _hand(0, 0, 0, 10, 10, 10, 20, 20, 20, 30, 30, 30, 31, 32)
    assert after_discard(hand, 32) == (0, 3)
    assert after_discard(hand, 31) == (0, 3)
    assert after_discard(hand, 0)[0] == 1  # breaking a set leaves the hand one away


def _bot_policy(play: ProbeTables):
    """The rule bot (stream 0) as a logits fn over the active tables' rows."""

    def policy(obs, mask):
        rows = torch.nonzero(play.active.bool()).squeeze(-1).tolist()
        logits = torch.full(mask.shape, -1e9)
        for i, t in enumerate(rows):
            logits[i, mj.action_index(mj.bot_action(play.sim.game(t), 0, "rule", 0), True)] = 0.0
        return logits

    return policy


def lowest_legal(obs, mask):
    return (-torch.arange(mask.shape[-1], dtype=torch.float32)).expand(len(obs), -1).masked_fill(~mask, float("-inf"))


def test_the_bot_agrees_with_itself_and_the_lowest_tile_does_not():
    play = ProbeTables(16, 3)
    same = measure(_bot_policy(play), play, 80)
    assert same["kinds"]["discard"]["decisions"] > 300 and same["plain_discards"] > 300
    assert all(k["agree"] == 1.0 and k["agree_ties"] == 1.0 for k in same["kinds"].values())
    assert sum(same["differences"].values()) == 0
    assert 0 < same["kinds"]["discard"]["bot_ties"] < 0.5  # ties between equally good tiles exist

    low = measure(lowest_legal, ProbeTables(16, 3), 80)
    assert low["kinds"]["discard"]["agree_ties"] < 0.6
    assert low["differences"]["shanten raised"] > 0 and set(low["differences"]) == set(SORTS)


def test_the_command_prints_and_writes_the_agreement(mahjong_runs, tmp_path, capsys):
    gate = mahjong_runs["phase2"] / "gates" / "phase1.pt"
    out = tmp_path / "agree.json"
    assert main(["--policy", str(gate), "--tables", "4", "--steps", "30", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "discard" in printed and "fewer advancing tiles" in printed
    summary = json.loads(out.read_text())
    assert summary["kinds"]["discard"]["decisions"] > 0 and summary["seed"] == 7
