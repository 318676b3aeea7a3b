"""1v3 duplicate bookkeeping: identical rotations rank 2.5 exactly, agreement with the engine's
records, the pluggable Table, the CI, the CLI."""

import json
import math

import pytest

import meeple_mahjong as mj
from meeple_mahjong import duplicate as dup
from meeple_mahjong import tables


def test_a_bot_against_copies_of_itself_ranks_exactly_2_5():
    # Seat streams are tied to (policy seed, seat), not to the player, so with four copies
    # of one bot the four rotations replay one identical game: the challenger takes each
    # seat's rank once, 1 + 2 + 3 + 4 over 4.
    for bot in ("rule", "random"):
        s = dup.run_duplicate(tables.BotTable(), bot, bot, games=3, seed=5).summary()
        ch, op = s["challenger"], s["opponents"]
        assert ch["avg_rank"] == 2.5 and op["avg_rank"] == 2.5
        assert ch["avg_rank_ci95"] == [2.5, 2.5]
        assert ch["rank_rates"] == [0.25] * 4
        for k in ("win_rate", "deal_in_rate", "riichi_rate", "call_rate", "avg_score"):
            assert ch[k] == pytest.approx(op[k]), k


def test_rotations_share_walls_and_seat_streams():
    jobs = dup.rotations(9, 4, "rule", "random")
    assert [seat for seat, _ in jobs] == [0, 1, 2, 3]
    assert {(j.session_seed, j.game_index, j.policy_seed) for _, j in jobs} == {
        (9, 4, dup.policy_seed(9, 4))
    }
    for seat, j in jobs:
        assert j.players[seat] == "rule" and j.players.count("random") == 3
    assert dup.policy_seed(9, 4) != dup.policy_seed(9, 5)


def test_results_agree_with_the_engine_records():
    table = tables.BotTable()
    job = tables.GameJob(3, 2, ("rule", "random", "rule", "rule-nofold"), 77)
    (res,) = table.play([job])
    g = mj.Game()
    g.reset(3, 2)
    mj.play_bots(g, list(job.players), 77)
    scores = list(g.scores)
    order = sorted(range(4), key=lambda s: (-scores[s], s))  # as selfplay.py ranks
    wins = g.wins()
    for s in range(4):
        r = res[s]
        assert r.score == scores[s]
        assert r.rank == order.index(s) + 1
        assert r.hands == g.hands_played
        assert r.wins == sum(w["winner"] == s for w in wins)
        assert r.tsumo == sum(w["winner"] == s and w["loser"] == -1 for w in wins)
        assert r.deal_ins == sum(w["loser"] == s for w in wins)
    assert sum(r.wins for r in res) == len(wins)


class _FixedTable:
    """A stand-in Table (as a learned policy would plug in): the seat's rank is fixed."""

    def __init__(self, ranks):
        self.ranks = ranks
        self.calls = 0

    def play(self, jobs):
        self.calls += 1
        out = []
        for _ in jobs:
            out.append(
                [
                    tables.SeatResult(
                        score=40000 - 10000 * (r - 1),
                        rank=r,
                        hands=10,
                        wins=4 - r,
                        tsumo=0,
                        deal_ins=r - 1,
                        riichi=1,
                        calls=0,
                    )
                    for r in self.ranks
                ]
            )
        return out


def test_bookkeeping_with_a_custom_table():
    table = _FixedTable([1, 2, 3, 4])  # seat s always ranks s + 1
    s = dup.run_duplicate(table, "learner", "rule", games=5, seed=0, chunk=2).summary()
    assert table.calls == 3  # 5 indices in chunks of 2
    ch, op = s["challenger"], s["opponents"]
    assert s["game_indices"] == 5 and ch["games"] == 20 and op["games"] == 60
    assert ch["avg_rank"] == 2.5 and ch["avg_rank_ci95"] == [2.5, 2.5]
    assert ch["win_rate"] == pytest.approx(6 / 40)  # (3+2+1+0) wins per 4 x 10 hands
    assert ch["deal_in_rate"] == pytest.approx(6 / 40)
    assert ch["avg_score"] == 25000


def test_mean_ci95():
    m, h = dup.mean_ci95([1.0, 2.0, 3.0, 4.0])
    assert m == 2.5
    assert h == pytest.approx(1.96 * math.sqrt((1.25 * 4 / 3) / 4))
    assert math.isnan(dup.mean_ci95([2.0])[1])
    stats = dup.DuplicateStats()
    with pytest.raises(ValueError, match="challenger_seat must be 0..3"):
        stats.add(0, 4, [])


def test_cli_writes_the_summary(tmp_path, capsys):
    out = tmp_path / "d.json"
    assert dup.main(["--challenger", "rule", "--opponent", "random", "--games", "2", "--seed", "1",
                     "--out", str(out)]) == 0  # fmt: skip
    s = json.loads(out.read_text())
    assert s["challenger_bot"] == "rule" and s["game_indices"] == 2
    assert s["challenger"]["games"] == 8 and s["opponents"]["games"] == 24
    ranks = s["challenger"]["per_index_rank"]  # the paired test's samples, by game index
    assert sorted(ranks) == ["0", "1"] and all(1 <= r <= 4 for r in ranks.values())
    assert sum(ranks.values()) / 2 == pytest.approx(s["challenger"]["avg_rank"])
    captured = capsys.readouterr()
    assert "challenger rule: avg rank" in captured.out
    # not a terminal: progress as plain lines on stderr (rich would show nothing), the last one at 100%
    assert "rule vs 3x random: 2/2 (100%)" in captured.err and "\x1b[" not in captured.err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--games", "0"], "--games must be >= 1, got 0"),
        (["--threads", "0"], "--threads must be >= 1, got 0"),
        (["--games", "x"], "argument --games: invalid int value: 'x'"),
    ],
)
def test_cli_mistakes_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as done:
        dup.main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err == f"python -m meeple_mahjong.duplicate: error: {message} (--help lists the options)\n"


def test_cli_rejects_unknown_bots(capsys):
    with pytest.raises(SystemExit):
        dup.main(["--challenger", "mortal"])
    assert "accepted: random, rule, rule-nofold" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown player 'x'"):
        tables.BotTable().play([tables.GameJob(0, 0, ("x", "rule", "rule", "rule"), 0)])
