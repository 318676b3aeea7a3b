"""Game state machine: self-play whose every win the `mahjong` package re-scores, determinism,
error handling."""

import json
import random
from collections import Counter

import pytest

import meeple_mahjong as mj
from meeple_mahjong.peers import peer_deltas

N_GREEDY = 300
N_RANDOM = 100


def _play(n_games: int, greedy: bool, seed: int, **rules):
    g = mj.Game(**rules)
    for i in range(n_games):
        g.reset(seed, i)
        if greedy:
            g.greedy_playout(i, 0.3)
        else:
            g.random_playout(i)
        yield g


def test_every_selfplay_win_matches_the_mahjong_package():
    wins = events = 0
    types, reasons, yaku = Counter(), Counter(), Counter()
    for greedy, n, rules in (
        (True, N_GREEDY, {}),
        (False, N_RANDOM, {}),
        (True, 100, {"east_only": True, "red_fives": False}),
    ):
        for g in _play(n, greedy, 11, **rules):
            assert g.is_done()
            assert sum(g.scores) == 4 * 25000  # points are conserved, sticks included
            for win in g.wins():
                peer, deltas = peer_deltas(win, rules.get("red_fives", True))
                assert peer["ok"], win
                assert (peer["han"], peer["fu"]) == (win["result"]["han"], win["result"]["fu"]), win
                assert deltas == list(win["deltas"]), (win, peer)
                yaku.update(peer["yaku"])
                wins += 1
            evs = [json.loads(e) for e in g.events()]
            events += len(evs)
            types.update(e["type"] for e in evs)
            reasons.update(e["reason"] for e in evs if e["type"] == "ryukyoku")
            assert evs[0]["type"] == "start_game" and evs[-1]["type"] == "end_game"
            assert evs[-1]["scores"] == list(g.scores)
    assert wins > 1500
    # Self-play reached the rule areas under test.
    for t in (
        "chi",
        "pon",
        "daiminkan",
        "ankan",
        "kakan",
        "dora",
        "reach",
        "reach_accepted",
        "hora",
    ):
        assert types[t] > 0, t
    assert reasons["fanpai"] > 0 and reasons["kyushukyuhai"] > 0
    for y in (
        "riichi",
        "ippatsu",
        "tsumo",
        "pinfu",
        "rinshan",
        "haitei",
        "houtei",
        "chankan",
        "daburu_riichi",
    ):
        assert yaku[y] > 0, y


def test_same_seed_same_game_and_walls_independent_of_players():
    a, b = mj.Game(), mj.Game()
    a.reset(5, 3)
    b.reset(5, 3)
    a.greedy_playout(1, 0.3)
    b.greedy_playout(1, 0.3)
    assert a.events() == b.events()
    # Different players (policy) on the same seed see the same first wall and deal.
    c = mj.Game()
    c.reset(5, 3)
    c.random_playout(99)
    first = lambda g: json.loads(g.events()[1])  # noqa: E731
    assert (
        first(a)["tehais"] == first(c)["tehais"]
        and first(a)["dora_marker"] == first(c)["dora_marker"]
    )


def test_illegal_action_names_seat_action_and_legal_set_and_changes_nothing():
    g = mj.Game()
    g.reset(1, 0)
    seat = g.pending()[0]
    before = (g.events(), g.hand(seat), list(g.scores))
    not_in_hand = next(t for t in range(136) if t not in g.hand(seat))
    with pytest.raises(
        ValueError, match=rf"illegal action for seat {seat}: discard .*; legal: \[discard"
    ):
        g.step(seat, mj.Action("discard", not_in_hand))
    other = (seat + 1) % 4
    with pytest.raises(ValueError, match=rf"seat {other} is not to act; pending: {seat}"):
        g.step(other, mj.Action("pass"))
    with pytest.raises(ValueError, match="unknown action type 'dahai'"):
        mj.Action("dahai", 0)
    assert (g.events(), g.hand(seat), list(g.scores)) == before
    g.step(seat, g.legal_actions(seat)[0])  # still playable


def test_python_loop_plays_a_full_game():
    rng = random.Random(0)
    g = mj.Game(east_only=True)
    g.reset(7, 0)
    steps = 0
    while not g.is_done():
        seat = g.pending()[0]
        g.step(seat, rng.choice(g.legal_actions(seat)))
        steps += 1
    assert steps > 100 and g.hands_played >= 4 and sum(g.scores) == 100000


def _check_flow(events: list[dict], east_only: bool) -> Counter:
    """An independent reading of the hand-to-hand rules, applied to one game's events."""
    seen = Counter()
    last_kyoku = 3 if east_only else 7
    starts = [i for i, e in enumerate(events) if e["type"] == "start_kyoku"]
    for n, i in enumerate(starts):
        start = events[i]
        end = starts[n + 1] if n + 1 < len(starts) else len(events)
        hand = events[i:end]
        index = "ESWN".index(start["bakaze"]) * 4 + start["kyoku"] - 1
        assert start["oya"] == index % 4
        results = [e for e in hand if e["type"] in ("hora", "ryukyoku")]
        assert results, "every hand ends in a win or a draw"
        for e in results:
            assert sum(e["deltas"]) == (
                1000 * start["kyotaku"]
                + 1000 * sum(1 for r in hand if r["type"] == "reach_accepted")
                if e["type"] == "hora" and e is results[0]
                else 0
            )
        draw = results[0] if results[0]["type"] == "ryukyoku" else None
        if draw and draw["reason"] == "fanpai":
            n_tenpai = sum(draw["tenpais"])
            expect = [0, 0, 0, 0]
            if 0 < n_tenpai < 4:
                expect = [
                    3000 // n_tenpai if t else -3000 // (4 - n_tenpai) for t in draw["tenpais"]
                ]
            assert draw["deltas"] == expect, draw
            seen["tenpai_payments"] += 0 < n_tenpai < 4
        if draw and draw["reason"] == "nagashimangan":
            seen["nagashi"] += 1
        dealer_kept = any(e["type"] == "hora" and e["actor"] == start["oya"] for e in results) or (
            draw is not None
            and (
                draw["reason"] != "fanpai"
                and draw["reason"] != "nagashimangan"
                or draw["tenpais"][start["oya"]]
            )
        )
        if n + 1 < len(starts):
            nxt = events[starts[n + 1]]
            nxt_index = "ESWN".index(nxt["bakaze"]) * 4 + nxt["kyoku"] - 1
            assert nxt_index == index + (0 if dealer_kept else 1), (start, results, nxt)
            assert nxt["honba"] == (start["honba"] + 1 if dealer_kept or draw else 0)
            assert nxt["kyotaku"] == (
                0
                if not draw
                else start["kyotaku"] + sum(1 for r in hand if r["type"] == "reach_accepted")
            )
            seen["renchan"] += dealer_kept
        else:
            final = events[-1]["scores"]
            pre = results[-1]["scores"]
            bust = min(pre) < 0
            top = max(range(4), key=lambda s: (pre[s], -s))
            ended_at_all_last = index >= last_kyoku and (
                (not dealer_kept and (max(pre) >= 30000 or index + 1 > last_kyoku + 4))
                or (dealer_kept and top == start["oya"] and pre[top] >= 30000)
            )
            assert bust or ended_at_all_last, (start, results)
            assert sum(final) == 100000
            seen["bust" if bust else "normal_end"] += 1
    return seen


def test_hand_to_hand_flow_follows_the_rules():
    seen = Counter()
    for east_only in (False, True):
        for g in _play(80, True, 17, east_only=east_only):
            seen += _check_flow([json.loads(e) for e in g.events()], east_only)
    assert (
        seen["tenpai_payments"] > 50
        and seen["renchan"] > 50
        and seen["normal_end"] > 50
        and seen["bust"] > 0
    ), seen
