"""Tenhou JSON -> MJAI (meeple_mahjong.corpus.tenhou): call strings, a hand-built hand, and
whole engine games written as Tenhou logs whose conversion replays to the same decisions."""

import json

import numpy as np
import pytest

import meeple_mahjong as mj
from meeple_mahjong import mjai
from meeple_mahjong.corpus import GameSamples, LogProblem, log_games
from meeple_mahjong.corpus.tenhou import Call, TenhouError, main, parse_call, tile, to_mjai


def test_tiles_and_call_strings():
    assert [tile(t) for t in (11, 19, 25, 39, 41, 47, 51, 52, 53)] == [
        "1m", "9m", "5p", "9s", "E", "C", "5mr", "5pr", "5sr",
    ]  # fmt: skip
    for bad in (10, 20, 48, 54, 60, "11"):
        with pytest.raises(TenhouError):
            tile(bad)
    assert parse_call("c275226") == Call("c", 27, [52, 26], 0)
    assert parse_call("p454545") == Call("p", 45, [45, 45], 0)
    assert parse_call("45p4545") == Call("p", 45, [45, 45], 1)
    assert parse_call("4545p45") == Call("p", 45, [45, 45], 2)
    assert parse_call("151515m51") == Call("m", 51, [15, 15, 15], 3)
    assert parse_call("383838a38") == Call("a", 38, [38, 38, 38], 3)
    assert parse_call("17k171717") == Call("k", 17, [17, 17, 17], 1)
    for bad in ("c2752", "cp275226", "x275226", "2c75226", "c27522a"):
        with pytest.raises(TenhouError):
            parse_call(bad)


# One hand built by hand, East 1: the dealer (seat 0) draws 9p, discards a haku that seat 1
# pons, and wins on seat 1's 9p: 123m 123p 123s NN 9p9p waits on N or 9p (sanshoku, chanta).
HAND = [
    [0, 0, 0], [25000, 25000, 25000, 25000], [41], [],
    [11, 12, 13, 21, 22, 23, 31, 32, 33, 44, 44, 29, 45], [29], [45],
    [45, 45, 29, 37, 38, 39, 17, 18, 42, 42, 43, 43, 16], ["p454545"], [29],
    [14, 14, 15, 16, 24, 24, 26, 27, 34, 34, 35, 36, 47], [], [],
    [18, 18, 17, 17, 27, 27, 28, 28, 36, 36, 37, 37, 47], [], [],
    ["和了", [12000, -12000, 0, 0], [0, 1, 0, "満貫12000点", "三色同順(2飜)", "混全帯幺九(2飜)"]],
]  # fmt: skip


def test_a_hand_built_hand_converts_and_replays(tmp_path):
    events = to_mjai({"name": ["a", "b", "c", "d"], "log": [HAND]})
    types = [e["type"] for e in events]
    assert types == [
        "start_game", "start_kyoku", "tsumo", "dahai", "pon", "dahai", "hora", "end_kyoku", "end_game",
    ]  # fmt: skip
    assert events[4] == {"type": "pon", "actor": 1, "target": 0, "pai": "P", "consumed": ["P", "P"]}
    assert events[6]["actor"] == 0 and events[6]["target"] == 1 and events[6]["pai"] == "9p"
    # The engine agrees with every event of the hand (a game needs more hands: the log ends
    # the game early, so the complete hand is kept and the end reported).
    path = mjai.write_log(tmp_path / "one.mjson", events)
    items = list(log_games(path))
    problems = [x for x in items if isinstance(x, LogProblem)]
    (gs,) = [x for x in items if isinstance(x, GameSamples)]
    assert gs.hands == 1 and not gs.complete and gs.names == ["a", "b", "c", "d"]
    assert (
        len(problems) == 1
        and "the log ends the game, but under these rules it goes on (E1, honba 1 next)"
        in problems[0].message
    )
    # Discard P (kind 31), pon, discard 9p (kind 17), ron.
    assert gs.samples["action"].tolist() == [31, 80, 17, 152]
    assert gs.samples["seat"].tolist() == [0, 1, 1, 0]
    assert gs.seat_stats[0]["wins"] == 1 and gs.seat_stats[1]["deal_ins"] == 1


def _code(name: str) -> int:
    kind, red = mj._mj.mjai_to_kind(name)
    if red:
        return 51 + kind // 9
    return 10 * (kind // 9 + 1) + kind % 9 + 1 if kind < 27 else 41 + kind - 27


def to_tenhou(lines: list[str]) -> dict:
    """The game of an engine MJAI log written as a Tenhou JSON log (the test's own writer)."""
    game = {"name": None, "log": []}
    hand = None
    for raw in lines:
        ev = json.loads(raw)
        t = ev["type"]
        a = ev.get("actor")
        if t == "start_game":
            game["name"] = ev["names"]
        elif t == "start_kyoku":
            rnd = "ESWN".index(ev["bakaze"]) * 4 + ev["kyoku"] - 1
            hand = {"head": [[rnd, ev["honba"], ev["kyotaku"]], ev["scores"], [_code(ev["dora_marker"])], []],
                    "deal": [[_code(x) for x in h] for h in ev["tehais"]],
                    "takes": [[], [], [], []], "discards": [[], [], [], []],
                    "result": [], "reach": [False] * 4, "pon_place": {}}  # fmt: skip
        elif t == "tsumo":
            hand["takes"][a].append(_code(ev["pai"]))
        elif t == "reach":
            hand["reach"][a] = True
        elif t == "dahai":
            d = 60 if ev["tsumogiri"] else _code(ev["pai"])
            hand["discards"][a].append(f"r{d}" if hand["reach"][a] else d)
            hand["reach"][a] = False
        elif t in ("chi", "pon", "daiminkan"):
            own = [str(_code(x)) for x in ev["consumed"]]
            place = {3: 0, 2: 1, 1: 2}[(ev["target"] - a) % 4]
            if t == "chi":
                place = 0
            if t == "daiminkan" and place == 2:
                place = 3
            own.insert(place, "cpm"[("chi", "pon", "daiminkan").index(t)] + str(_code(ev["pai"])))
            hand["takes"][a].append("".join(own))
            if t == "pon":
                hand["pon_place"][(a, mj._mj.mjai_to_kind(ev["pai"])[0])] = place
            if t == "daiminkan":
                hand["discards"][a].append(0)
        elif t == "ankan":
            c = [str(_code(x)) for x in ev["consumed"]]
            hand["discards"][a].append("".join(c[:3]) + "a" + c[3])
        elif t == "kakan":
            own = [str(_code(x)) for x in ev["consumed"]]
            place = hand["pon_place"][(a, mj._mj.mjai_to_kind(ev["pai"])[0])]
            own.insert(place, "k" + str(_code(ev["pai"])))
            hand["discards"][a].append("".join(own))
        elif t == "dora":
            hand["head"][2].append(_code(ev["dora_marker"]))
        elif t == "hora":
            if not hand["result"]:
                hand["result"] = ["和了"]
            if ev["uradora_markers"]:  # one list per hand (a double ron's second winner shows none)
                hand["head"][3] = [_code(x) for x in ev["uradora_markers"]]
            hand["result"] += [ev["deltas"], [a, ev["target"], a, "", ""]]
        elif t == "ryukyoku":
            name = "九種九牌" if ev["reason"] == "kyushukyuhai" else "流局"
            hand["result"] = [name, ev["deltas"]]
        elif t == "end_kyoku":
            arr = list(hand["head"])
            for s in range(4):
                arr += [hand["deal"][s], hand["takes"][s], hand["discards"][s]]
            game["log"].append([*arr, hand["result"]])
    return game


def _samples(path):
    items = list(log_games(path))
    assert not [x for x in items if isinstance(x, LogProblem)], [str(x) for x in items]
    (gs,) = items
    return gs


@pytest.mark.parametrize("play", ["rule", "greedy"])
def test_engine_games_round_trip_through_tenhou_json(tmp_path, play):
    kans = 0
    for i in range(4):
        g = mj.Game()
        g.reset(11, i)
        if play == "rule":
            mj.play_bots(g, ["rule"] * 4, i)
        else:
            g.greedy_playout(i, 0.8)
        lines = g.events()
        kans += sum('"kakan"' in x or '"daiminkan"' in x or '"ankan"' in x for x in lines)
        src = tmp_path / f"{play}{i}.json"
        src.write_text(json.dumps(to_tenhou(lines), ensure_ascii=False))
        out = tmp_path / f"{play}{i}.mjson"
        assert main([str(src), "--out", str(out)]) == 0
        assert mjai.replay_file(out).ok, str(mjai.replay_file(out))
        original = tmp_path / f"orig{i}.mjson"
        mjai.write_log(original, lines)
        a, b = _samples(original), _samples(out)
        assert isinstance(b, GameSamples) and b.complete and b.hands == a.hands
        for k in ("action", "seat", "mask", "obs", "danger"):
            assert np.array_equal(a.samples[k], b.samples[k]), k
    if play == "greedy":
        assert kans > 0


def test_broken_tenhou_logs_say_which_hand(tmp_path, capsys):
    bad = json.loads(json.dumps(HAND))
    bad[5] = ["p454545"]  # seat 0 would call where it draws
    with pytest.raises(TenhouError, match=r"hand 0 \(E1\): seat 0 calls"):
        to_mjai({"log": [bad]})
    with pytest.raises(TenhouError, match="log"):
        to_mjai({"title": "x"})
    src = tmp_path / "bad.json"
    src.write_text("{not json")
    assert main([str(src), "--out", str(tmp_path / "o.mjson")]) == 1
    assert capsys.readouterr().out.startswith(f"{src}: ")
