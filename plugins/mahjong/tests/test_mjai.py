"""MJAI logs: the engine's logs replay cleanly; bad logs are reported with line numbers."""

import json

import pytest

import meeple_mahjong as mj
from meeple_mahjong import mjai, selfplay, validate


def _game(seed=3, index=0, greedy=True, **rules):
    g = mj.Game(**rules)
    g.reset(seed, index)
    g.greedy_playout(index, 0.4) if greedy else g.random_playout(index)
    return g


def test_engine_logs_replay_cleanly():
    checked = 0
    for i in range(40):
        rules = {"east_only": True, "red_fives": False} if i % 4 == 3 else {}
        g = _game(index=i, greedy=i % 2 == 0, **rules)
        report = mjai.replay(g.events(), **rules)
        assert report.ok, (i, str(report))
        assert report.final_scores == [list(g.scores)]
        checked += report.events
    assert checked > 20_000


def test_every_event_type_is_written():
    types = set()
    for i in range(30):
        types |= {json.loads(e)["type"] for e in _game(seed=8, index=i).events()}
    assert types >= {
        "start_game", "start_kyoku", "tsumo", "dahai", "chi", "pon", "daiminkan", "ankan", "kakan",
        "dora", "reach", "reach_accepted", "hora", "ryukyoku", "end_kyoku", "end_game",
    }  # fmt: skip


def _first(events, type_):
    return next(i for i, e in enumerate(events) if json.loads(e)["type"] == type_)


def test_bad_logs_report_the_first_bad_line():
    events = _game().events()
    # Malformed JSON.
    bad = list(events)
    bad[5] = bad[5][:-3]
    r = mjai.replay(bad)
    assert not r.ok and r.line == 6 and "malformed JSON" in r.message
    # An illegal discard: a tile the seat does not hold.
    i = _first(events, "dahai")
    ev = json.loads(events[i])
    hand = json.loads(events[1])["tehais"][ev["actor"]]
    missing = next(
        t for t in ("1m", "9p", "E", "C", "5s", "2m") if t not in hand and t != ev["pai"]
    )
    ev["pai"] = missing
    bad = list(events)
    bad[i] = json.dumps(ev)
    r = mjai.replay(bad)
    assert (
        not r.ok
        and r.line == i + 1
        and f"illegal dahai by seat {ev['actor']}" in r.message
        and "legal:" in r.message
    )
    # A win whose points differ from what the engine computes.
    i = _first(events, "hora")
    ev = json.loads(events[i])
    ev["deltas"] = [d + 100 * (s == ev["actor"]) for s, d in enumerate(ev["deltas"])]
    bad = list(events)
    bad[i] = json.dumps(ev)
    r = mjai.replay(bad)
    assert not r.ok and r.line == i + 1 and "hora.deltas" in r.message
    # Unknown fields and event types are ignored; a truncated log is reported.
    extra = [json.dumps({**json.loads(e), "comment": "x"}) for e in events] + [
        '{"type":"chat","text":"gg"}'
    ]
    assert mjai.replay(extra).ok
    r = mjai.replay(events[:-40])
    assert not r.ok and "ends before" in r.message
    # Not an object / no type.
    r = mjai.replay(['["start_game"]'])
    assert not r.ok and r.line == 1


def test_selfplay_and_validate_cli(tmp_path, capsys):
    out = tmp_path / "logs"
    assert (
        selfplay.main(["--games", "3", "--seed", "5", "--out", str(out), "--gzip", "--verify"]) == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["games"] == 3 and summary["score_mismatches"] == 0 and summary["wins"] > 0
    logs = sorted(out.glob("*.mjson.gz"))
    assert len(logs) == 3
    assert validate.main([str(p) for p in logs]) == 0
    assert "3/3 logs replayed cleanly" in capsys.readouterr().out
    broken = tmp_path / "broken.mjson"
    lines = mjai.read_lines(logs[0])
    broken.write_text("\n".join(lines[:3] + ["{oops"] + lines[3:]) + "\n")
    assert validate.main([str(broken)]) == 1
    assert "line 4: malformed JSON" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        selfplay.main(["--games", "0", "--out", str(out)])


def test_mutated_logs_are_reported_never_raised():
    # Truncated lines, dropped events and fields set to junk: replay always returns a report,
    # a failing one carries a line number, and none is an internal error.
    import random

    base = _game(seed=1).events()
    rng = random.Random(0)
    junk = [None, -1, 4, 7, "5mr", "?", "X", [], ["1m"] * 14, "reach", 1e9, {"a": 1}]
    failures = 0
    for _ in range(200):
        ev = list(base)
        i = rng.randrange(len(ev))
        r = rng.random()
        if r < 0.3:
            ev[i] = ev[i][: rng.randrange(len(ev[i]))]
        elif r < 0.5:
            del ev[i]
        else:
            d = json.loads(ev[i])
            d[
                rng.choice(
                    ["actor", "target", "pai", "consumed", "tehais", "oya", "deltas", "scores"]
                )
            ] = rng.choice(junk)
            ev[i] = json.dumps(d)
        report = mjai.replay(ev)
        assert not report.message.startswith("internal error"), report.message
        if not report.ok:
            failures += 1
            assert report.line is not None and 1 <= report.line <= len(ev)
    assert failures > 100  # the rest set fields an event does not have (ignored)


def _one_game(tmp_path) -> list[str]:
    out = tmp_path / "logs"
    assert selfplay.main(["--games", "1", "--seed", "3", "--out", str(out)]) == 0
    return mjai.read_lines(next(out.glob("*.mjson")))


def test_validate_refuses_an_empty_log(tmp_path, capsys):
    empty = tmp_path / "empty.mjson"
    empty.write_text("\n")
    assert validate.main([str(empty)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == f"{empty}: no events (the log is empty)"


def test_an_unknown_event_type_is_blamed_on_its_own_line(tmp_path):
    lines = _one_game(tmp_path)
    ev = json.loads(lines[5])
    ev["type"] = ev["type"][::-1]  # a typo'd type where a real event was
    r = mjai.replay(lines[:5] + [json.dumps(ev)] + lines[6:])
    assert not r.ok and r.line == 6
    assert r.message.startswith(f"unknown event type {ev['type']!r} (accepted: ankan, chi, dahai, ")
    assert "right after it, line 7: " in r.message


def test_unreadable_files_say_what_is_wrong(tmp_path, capsys):
    binary = tmp_path / "binary.mjson"
    binary.write_bytes(b'{"type": "start_game"}\n\xff\xfe\n')
    missing = tmp_path / "missing.mjson"
    assert validate.main([str(missing), str(binary)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{missing}: file not found"
    assert out[1].startswith(f"{binary}: not UTF-8 text (byte 0xff at offset 23)")
    assert "None" not in "\n".join(out)


def test_json_errors_read_as_one_phrase():
    r = mjai.replay(['{"type": "start_game", "names": ["a]'])
    assert not r.ok and r.line == 1
    assert r.message == "malformed JSON: Unterminated string starting at column 34"


def _foreign_style(events: list[str]) -> list[str]:
    """The stream as other writers produce it: hora without pai and scores, ura_markers,
    Japanese yaku names, extra fields, no end_kyoku / end_game."""
    out = []
    for raw in events:
        ev = json.loads(raw)
        if ev["type"] in ("end_kyoku", "end_game"):
            continue
        if ev["type"] == "hora":
            del ev["pai"], ev["scores"]
            ev["ura_markers"] = ev.pop("uradora_markers")
            ev["yakus"] = [["立直", 1]] * len(ev.get("yakus", []))
        ev["meta"] = {"q_values": [0.1, 0.2]}
        out.append(json.dumps(ev, ensure_ascii=False))
    return out


def test_other_writers_variants_replay():
    wins = 0
    for i in range(6):
        g = _game(seed=4, index=i, greedy=i % 2 == 0)
        foreign = _foreign_style(g.events())
        wins += sum(json.loads(e)["type"] == "hora" for e in foreign)
        report = mjai.replay(foreign)
        assert report.ok, (i, str(report))
        assert report.final_scores == [list(g.scores)]
    assert wins >= 10
    foreign = _foreign_style(_game(seed=4, index=0).events())
    # A wrong winner is still caught without pai.
    i = _first(foreign, "hora")
    ev = json.loads(foreign[i])
    ev["actor"] = ev["target"] = next(s for s in range(4) if s not in (ev["actor"], ev["target"]))
    r = mjai.replay(foreign[:i] + [json.dumps(ev)] + foreign[i + 1 :])
    assert not r.ok and r.line == i + 1, str(r)


def test_riichienv_log_replays(tmp_path):
    # Written by RiichiEnv's arena (tests/data/README.md): hora without pai, ura_markers.
    from pathlib import Path

    report = mjai.replay_file(Path(__file__).parent / "data" / "riichienv_126_204_0.mjson")
    assert report.ok and report.games == 1, str(report)
    assert sum(report.final_scores[0]) == 100_000
