"""Samples from MJAI logs (meeple_mahjong.corpus.samples): a foreign log, broken and truncated
logs, gzip, and rule-bot self-play whose samples must be the rule bot's own decisions."""

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import meeple_mahjong as mj
from meeple_mahjong import mjai, selfplay
from meeple_mahjong.corpus import SAMPLE_FIELDS, GameSamples, LogProblem, log_games

FOREIGN = Path(__file__).parent / "data" / "riichienv_126_204_0.mjson"


def _split(items):
    games = [x for x in items if isinstance(x, GameSamples)]
    problems = [x for x in items if isinstance(x, LogProblem)]
    assert len(games) + len(problems) == len(items)
    return games, problems


def _check_fields(gs: GameSamples):
    s = gs.samples
    assert set(s) == set(SAMPLE_FIELDS)
    n = len(s["action"])
    for k, (shape, dtype) in SAMPLE_FIELDS.items():
        assert s[k].shape == (n, *shape) and s[k].dtype == dtype, k
    assert (s["action"] >= 0).all()
    assert s["mask"][np.arange(n), s["action"]].all(), "every action is legal in its mask"
    assert ((s["hand"] >= 0) & (s["hand"] < gs.hands)).all()
    assert len(gs.seat_stats) == 4 and sorted(x["rank"] for x in gs.seat_stats) == [0, 1, 2, 3]
    for st in gs.seat_stats:
        seat_rows = s["seat"] == gs.seat_stats.index(st)
        assert (s["rank"][seat_rows] == st["rank"]).all()
        assert (s["score"][seat_rows] == st["score"]).all()


def _log_counts(lines, upto_line=None):
    counts = Counter()
    for no, raw in enumerate(lines, 1):
        if upto_line is not None and no > upto_line:
            break
        ev = json.loads(raw)
        counts[ev["type"]] += 1
    return counts


def _action_counts(actions):
    a = np.asarray(actions)
    return {
        "dahai": int((a < 74).sum()),  # plain and riichi discards
        "reach": int(((a >= 37) & (a < 74)).sum()),
        "chi": int(((a >= 74) & (a < 80)).sum()),
        "pon": int(((a >= 80) & (a < 82)).sum()),
        "ankan": int(((a >= 83) & (a < 117)).sum()),
        "hora": int(((a == 151) | (a == 152)).sum()),
    }


def test_foreign_log_yields_every_decision_with_replay_agreement():
    items = list(log_games(FOREIGN))
    games, problems = _split(items)
    assert problems == [] and len(games) == 1
    gs = games[0]
    assert gs.complete and gs.hands == 12 and gs.problems == [] and gs.line == 1
    assert gs.names == ["0", "1", "2", "3"] and gs.source == str(FOREIGN) and gs.game == 0
    _check_fields(gs)
    lines = mjai.read_lines(FOREIGN)
    log = _log_counts(lines)
    # Every decision the log shows is a sample with that action (the engine agreed with each).
    acts = _action_counts(gs.samples["action"])
    for t in ("dahai", "reach", "chi", "pon", "ankan", "hora"):
        assert acts[t] == log[t], t
    assert log["hora"] == 9 and sum(x["wins"] for x in gs.seat_stats) == 9
    assert sum(x["riichi"] for x in gs.seat_stats) == log["reach_accepted"]
    assert sum(x["calls"] for x in gs.seat_stats) == log["chi"] + log["pon"] + log["daiminkan"]
    assert sum(x["score"] for x in gs.seat_stats) == 100_000
    assert (gs.samples["action"] == mjai.PASS).sum() > 0  # passes on claims are decisions too


def test_truncated_log_keeps_its_complete_hands_and_reports(tmp_path):
    lines = mjai.read_lines(FOREIGN)
    ends = [no for no, x in enumerate(lines, 1) if '"end_kyoku"' in x]
    cut = ends[4] + 30  # inside the sixth hand
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(lines[:cut]) + "\n")
    games, problems = _split(list(log_games(short)))
    assert len(problems) == 1 and len(games) == 1
    gs, p = games[0], problems[0]
    assert not gs.complete and gs.hands == 5 and gs.problems == [str(p)]
    assert p.path == str(short) and p.line == cut and "ends before" in p.message
    assert str(p).startswith(f"{short}:{cut}: ")
    _check_fields(gs)
    assert gs.samples["hand"].max() == 4
    # Rank and score come from the scores after the fifth hand (the sixth start_kyoku's).
    sixth = json.loads(lines[ends[4]])
    assert sixth["type"] == "start_kyoku"
    assert [x["score"] for x in gs.seat_stats] == sixth["scores"]
    full = next(x for x in log_games(FOREIGN) if isinstance(x, GameSamples))
    n = len(gs.samples["action"])
    for k in SAMPLE_FIELDS:
        if k not in ("rank", "score"):
            assert np.array_equal(gs.samples[k], full.samples[k][:n]), k


def _selfplay(tmp_path, *args, folder="logs"):
    out = tmp_path / folder
    assert selfplay.main(["--out", str(out), *args]) == 0
    return sorted(out.glob("game_*"))


def test_corrupted_line_is_reported_and_the_next_game_in_the_file_goes_on(tmp_path):
    a, b = _selfplay(tmp_path, "--games", "2", "--seed", "4", "--policy", "rule")
    la, lb = mjai.read_lines(a), mjai.read_lines(b)
    ends = [no for no, x in enumerate(la, 1) if '"end_kyoku"' in x]
    bad_line = ends[1] + 5  # in the third hand of the first game
    la[bad_line - 1] = la[bad_line - 1][:-4]
    both = tmp_path / "both.mjson"
    both.write_text("\n".join(la + lb) + "\n")
    games, problems = _split(list(log_games(both)))
    assert len(problems) == 1 and str(problems[0]).startswith(
        f"{both}:{bad_line}: game 0: malformed JSON"
    )
    assert [g.game for g in games] == [0, 1]
    g0, g1 = games
    assert not g0.complete and g0.hands == 2 and g0.problems == [str(problems[0])]
    assert g1.complete and g1.problems == [] and g1.line == len(la) + 1
    _check_fields(g0)
    _check_fields(g1)
    alone = next(x for x in log_games(b) if isinstance(x, GameSamples))
    for k in SAMPLE_FIELDS:
        assert np.array_equal(g1.samples[k], alone.samples[k]), k
    # An illegal event (a tile the seat does not hold) is reported with its line, too.
    i = next(i for i, x in enumerate(lb) if '"dahai"' in x)
    ev = json.loads(lb[i])
    hand = json.loads(lb[1])["tehais"][ev["actor"]]
    ev["pai"] = next(
        t for t in ("1m", "9p", "E", "C", "5s", "2m") if t not in hand and t != ev["pai"]
    )
    lb[i] = json.dumps(ev)
    illegal = tmp_path / "illegal.mjson"
    illegal.write_text("\n".join(lb) + "\n")
    games, problems = _split(list(log_games(illegal)))
    assert games == [] and problems[0].line == i + 1 and "illegal dahai" in problems[0].message


def test_unreadable_and_empty_files_are_problems_not_exceptions(tmp_path):
    (tmp_path / "empty.mjson").write_text("\n")
    for name, words in (("missing.mjson", "file not found"), ("empty.mjson", "no events")):
        items = list(log_games(tmp_path / name))
        assert len(items) == 1 and isinstance(items[0], LogProblem) and items[0].line is None
        assert words in items[0].message
    with pytest.raises(TypeError):
        list(log_games(FOREIGN, rules={"no_such_rule": True}))


def test_gzip_and_names_give_identical_samples(tmp_path):
    packed = tmp_path / "foreign.json"  # gzip is recognised by its bytes, whatever the name
    packed.write_bytes(gzip.compress(FOREIGN.read_bytes()))
    plain = next(x for x in log_games(FOREIGN) if isinstance(x, GameSamples))
    gz = next(x for x in log_games(packed) if isinstance(x, GameSamples))
    for k in SAMPLE_FIELDS:
        assert np.array_equal(plain.samples[k], gz.samples[k]), k


def _rule_reference(session_seed, game_index, policy_seed):
    """The game played from Python: each seat's rule bot on its own stream, as play_bots does.
    Returns (seat, action index, legal mask) per decision in the order seats act."""
    g = mj.Game()
    g.reset(session_seed, game_index)
    streams = [mj._mj.BotStream(mj._mj.seat_stream_seed(policy_seed, s)) for s in range(4)]
    out = []
    while not g.is_done():
        seat = g.pending()[0]
        a = streams[seat].act(g, seat, "rule")
        out.append((seat, mj.action_index(a), mj.legal_mask(g, seat).astype(bool)))
        g.step(seat, a)
    return out


def test_rule_selfplay_samples_are_the_rule_bots_decisions(tmp_path):
    logs = _selfplay(tmp_path, "--games", "2", "--seed", "9", "--policy", "rule")
    for index, log in enumerate(logs):
        games, problems = _split(list(log_games(log)))
        assert problems == [] and len(games) == 1
        gs = games[0]
        assert gs.complete and gs.names == ["rule"] * 4
        _check_fields(gs)
        ref = _rule_reference(9, index, index)
        s = gs.samples
        assert len(ref) == len(s["action"])
        assert [r[0] for r in ref] == s["seat"].tolist()
        assert [r[1] for r in ref] == s["action"].tolist()
        assert np.array_equal(np.stack([r[2] for r in ref]), s["mask"])
    # Decisions re-asked from bot_action (another seed) on the same state mostly agree: the rule
    # bot draws randomness only to break exact ties (96.4% agreement over 10 games, 5,528
    # decisions; 95.5% of discards).
    g = mj.Game()
    g.reset(9, 0)
    agree = 0
    decisions = next(x for x in log_games(logs[0]) if isinstance(x, GameSamples)).samples
    for seat, index in list(zip(decisions["seat"].tolist(), decisions["action"].tolist()))[:200]:
        assert g.pending()[0] == seat
        agree += mj.action_index(mj.bot_action(g, seat, "rule", 12345)) == index
        g.step(seat, mj.action_from_index(g, seat, index))
    assert agree >= 180


def _windows(gs):
    """(row of an own-turn discard, rows of the claims window right after it)."""
    s = gs.samples
    a, m = s["action"], s["mask"]
    n = len(a)
    r = 0
    while r < n:
        if a[r] < 74:
            w = r + 1
            while w < n and m[w, mjai.PASS]:
                w += 1
            yield r, range(r + 1, w)
            r = w
        else:
            r += 1


def test_tenpai_and_danger_hold_for_every_ron_chance(tmp_path):
    # Whenever a discard can be ronned, the discarder's sample marked that kind as danger and
    # the seat that could ron as tenpai (the converse does not hold: yaku are not checked).
    logs = _selfplay(tmp_path, "--games", "3", "--seed", "2", "--policy", "rule")
    chances = dangers = 0
    for log in [*logs, FOREIGN]:
        gs = next(x for x in log_games(log) if isinstance(x, GameSamples))
        s = gs.samples
        for row, window in _windows(gs):
            a = int(s["action"][row])
            cls = a % 37 if a >= 37 else a
            kind = cls if cls < 34 else 9 * (cls - 34) + 4
            dangers += bool(s["danger"][row, kind])
            for w in window:
                if s["mask"][w, mjai.RON]:
                    chances += 1
                    rel = (int(s["seat"][w]) - int(s["seat"][row])) % 4
                    assert s["danger"][row, kind], (log, row)
                    assert s["tenpai"][row, rel - 1], (log, row)
    assert chances >= 10 and dangers >= chances
    # Opponents' tenpai is one fact seen from several seats: deciders in the same window agree.
    gs = next(x for x in log_games(logs[0]) if isinstance(x, GameSamples))
    s = gs.samples
    for _, window in _windows(gs):
        seen = {}
        for w in window:
            me = int(s["seat"][w])
            for i in range(3):
                seen.setdefault((me + i + 1) % 4, set()).add(bool(s["tenpai"][w, i]))
        assert all(len(v) == 1 for v in seen.values())


def test_selfplay_bots_per_seat_name_the_players(tmp_path):
    (log,) = _selfplay(tmp_path, "--games", "1", "--bots", "rule,rule,random,rule")
    gs = next(x for x in log_games(log) if isinstance(x, GameSamples))
    assert gs.complete and gs.names == ["rule", "rule", "random", "rule"]
    assert [x["name"] for x in gs.seat_stats] == gs.names
    for bad in ("rule,rule,rule", "rule,rule,rule,nobody"):
        with pytest.raises(SystemExit):
            selfplay.main(["--games", "1", "--out", str(tmp_path / "x"), "--bots", bad])


class _OracleTargets(mjai.Replayer):
    """Reference targets straight from encode_oracle's planes, at every decision."""

    def __init__(self, game):
        super().__init__(game)
        self.tenpai, self.danger = [], []

    def on_decision(self, seats, masks):
        for s in seats:
            o = mj.encode_oracle(self.g, s)
            tenpai = [round(o[9 * i + 5, 0] * 7) - 1 <= 0 for i in range(3)]
            live_waits = [(o[9 * i + 6] > 0) & (o[9 * i + 7, 0] == 0) for i in range(3)]
            self.tenpai.append(tenpai)
            self.danger.append(np.any(live_waits, axis=0))


def test_tenpai_and_danger_equal_the_oracle_planes(tmp_path):
    logs = _selfplay(tmp_path, "--games", "4", "--seed", "6", "--policy", "rule")
    # Many calls and kans: a kind held four times across hand and melds is no wait.
    logs += _selfplay(tmp_path, "--games", "4", "--seed", "3", "--call-prob", "0.7", folder="g")
    total = 0
    for log in [*logs, FOREIGN]:
        gs = next(x for x in log_games(log) if isinstance(x, GameSamples))
        (game,) = mjai.split_games(mjai.read_lines(log))
        ref = _OracleTargets(game)
        ref.run()
        assert np.array_equal(gs.samples["tenpai"], np.array(ref.tenpai)), log
        assert np.array_equal(gs.samples["danger"], np.array(ref.danger)), log
        total += len(ref.tenpai)
    assert total > 6000


def test_a_hand_that_cannot_exist_keeps_the_hands_before_it(tmp_path):
    (log,) = _selfplay(tmp_path, "--games", "1", "--seed", "4", "--policy", "rule")
    lines = mjai.read_lines(log)
    starts = [i for i, x in enumerate(lines) if '"start_kyoku"' in x]
    ev = json.loads(lines[starts[2]])
    ev["tehais"][0] = ["1m"] * 13  # five or more copies of a tile
    lines[starts[2]] = json.dumps(ev)
    bad = tmp_path / "bad.mjson"
    bad.write_text("\n".join(lines) + "\n")
    games, problems = _split(list(log_games(bad)))
    assert [str(p) for p in problems] == [
        f"{bad}:{starts[2] + 1}: game 0: this hand uses more copies of 1m than exist"
    ]
    (gs,) = games
    assert gs.hands == 2 and not gs.complete and gs.samples["hand"].max() == 1
    _check_fields(gs)
