"""Corpus manifest: counts from real logs, problems, the chronological hold-out, player filters
on hand-made statistics, source weights."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from meeple_mahjong.corpus import manifest, samples
from meeple_mahjong.corpus.samples import SAMPLE_FIELDS, GameSamples, LogProblem, log_games


def test_scan_counts_match_log_games(tiny_corpus, selfplay_logs):
    m, _ = tiny_corpus
    games = [g for f in sorted(selfplay_logs.glob("*.mjson")) for g in log_games(f)]
    assert len(games) == 3 and all(isinstance(g, GameSamples) for g in games)
    s = manifest.summary(m)
    assert (s["files"], s["games"], s["problems"]) == (3, 3, 0)  # summary.json is not a log
    assert s["samples"] == sum(len(g.samples["action"]) for g in games)
    assert (s["train_games"], s["val_games"]) == (2, 1)
    assert s["train_samples_kept"] + s["val_samples_kept"] == s["samples"]  # filters off
    con = sqlite3.connect(m)
    per_seat = con.execute("SELECT SUM(samples) FROM seats GROUP BY game ORDER BY game").fetchall()
    assert [r[0] for r in per_seat] == [len(g.samples["action"]) for g in games]


def _fake_game(path, index, names, stats):
    empty = {k: np.zeros((0, *shape), dtype) for k, (shape, dtype) in SAMPLE_FIELDS.items()}
    seat_stats = [dict(name=n, rank=r, score=25000, hands=h, wins=w, deal_ins=d, riichi=0, calls=0)
                  for n, (r, h, w, d) in zip(names, stats)]  # fmt: skip
    return GameSamples(str(path), index, 1, list(names), empty, 8, True, seat_stats, [])


@pytest.fixture
def fake_logs(tmp_path, monkeypatch):
    """Ten one-game files whose games `log_games` replaces by hand-made statistics: player A
    (rank 1, 10 hands, 3 wins, 1 deal-in each game) passes every filter, B deals in too often,
    C ranks too low, D wins too rarely. File k has mtime 1000 - k: the newest files come first
    by name, so the hold-out must follow mtimes, not names."""
    folder = tmp_path / "logs"
    folder.mkdir()
    files = []
    for k in range(10):
        f = folder / f"g{k}.mjson"
        f.write_text("{}\n")
        os.utime(f, (1000 - k, 1000 - k))
        files.append(f)
    (folder / "broken.json").write_text("x\n")
    os.utime(folder / "broken.json", (0, 0))
    stats = {"A": (0, 10, 3, 1), "B": (1, 10, 3, 3), "C": (3, 10, 3, 1), "D": (2, 10, 1, 1)}

    def fake(path, *, rules=None):
        if Path(path).name == "broken.json":
            yield LogProblem(str(path), 1, "not JSON")
            return
        yield _fake_game(path, 0, "ABCD", [stats[n] for n in "ABCD"])

    monkeypatch.setattr(samples, "log_games", fake)
    return folder, files


def test_holdout_is_chronological_by_mtime(fake_logs, tmp_path):
    folder, files = fake_logs
    m = tmp_path / "m.sqlite"
    manifest.scan([str(folder)], m, val_fraction=0.2, filters=None, progress=False)
    con = sqlite3.connect(m)
    val = {r[0] for r in con.execute(
        "SELECT f.path FROM games g JOIN files f ON g.file = f.id WHERE g.split = 'val'")}  # fmt: skip
    assert val == {str(files[0]), str(files[1])}  # the two newest mtimes
    assert manifest.problems(m) == [f"{folder / 'broken.json'}:1: not JSON"]


def test_player_filters_on_training_games_only(fake_logs, tmp_path):
    folder, _ = fake_logs
    m = tmp_path / "m.sqlite"
    s = manifest.scan([str(folder)], m, val_fraction=0.2, progress=False,
                      filters={"min_games": 8, "max_avg_rank": 2.6, "max_deal_in_rate": 0.16,
                               "min_win_rate": 0.17})  # fmt: skip
    con = sqlite3.connect(m)
    players = {r[0]: r[1:] for r in con.execute(
        "SELECT name, games, avg_rank, deal_in_rate, win_rate, kept FROM players")}  # fmt: skip
    assert players["A"] == (8, 1.0, 0.1, 0.3, 1)  # 8 training games of 10
    assert players["B"][-1] == 0 and players["C"][-1] == 0 and players["D"][-1] == 0
    assert s["players_kept"] == 1
    kept = con.execute("SELECT DISTINCT name FROM seats WHERE kept = 1").fetchall()
    assert kept == [("A",)]  # validation seats of A are kept too
    # 9 training games are needed: nobody passes; bounds set to None switch a filter off
    assert manifest.select(m, val_fraction=0.2, filters={"min_games": 9})["players_kept"] == 0
    off = manifest.select(m, val_fraction=0.2, filters={"min_games": None, "max_avg_rank": None,
                          "max_deal_in_rate": 0.25, "min_win_rate": None})  # fmt: skip
    assert off["players_kept"] == 3  # B (deal-in 0.3) out, C and D pass without rank/win bounds
    with pytest.raises(ValueError, match="unknown player filter key"):
        manifest.select(m, filters={"min_game": 3})


def test_sources_weights_and_errors(fake_logs, tmp_path):
    folder, files = fake_logs
    m = tmp_path / "m.sqlite"
    manifest.scan([f"{files[0]}@2.5", f"{folder}/g[1-3].mjson@0.5", str(folder)], m,
                  filters=None, progress=False)  # fmt: skip
    games = manifest.games_by_file(m)
    weight = {p: e[0].weight for p, e in games.items()}
    assert weight[str(files[0])] == 2.5  # a file named twice belongs to the first source
    assert {weight[str(files[k])] for k in (1, 2, 3)} == {0.5}
    assert weight[str(files[9])] == 1.0
    assert manifest.Source.parse("a@b@0.25") == manifest.Source("a@b", 0.25)
    with pytest.raises(ValueError, match="weight"):
        manifest.Source.parse("logs@-1")
    with pytest.raises(FileNotFoundError, match="no such file"):
        manifest.scan([str(tmp_path / "missing")], m, progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no MJAI logs in it"):
        manifest.scan([str(folder), str(tmp_path / "empty")], m, progress=False)
    assert manifest.summary(m)["games"] == 10  # the failed scan left the old manifest whole


def test_cli_scan_build_info(selfplay_logs, tmp_path, capsys):
    from meeple_mahjong.corpus.__main__ import main

    m, out = tmp_path / "m.sqlite", tmp_path / "shards"
    assert main(["scan", str(selfplay_logs), "--manifest", str(m), "--min-games", "2",
                 "--max-avg-rank", "off", "--max-deal-in-rate", "off", "--min-win-rate", "off"]) == 0  # fmt: skip
    assert manifest.summary(m)["filters"]["min_games"] == 2
    assert main(["build", "--manifest", str(m), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "train games 3" in printed and "players_kept" in printed
    assert "kept: " in printed  # every player of 3 games passes min_games 2
    assert main(["info", str(tmp_path / "nothing")]) == 2
    assert "error: no corpus manifest" in capsys.readouterr().err


def test_truncated_log_keeps_complete_hands_and_one_problem(selfplay_logs, tmp_path):
    lines = (selfplay_logs / "game_00000.mjson").read_text().splitlines()
    cut = tmp_path / "cut.mjson"
    cut.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    m = tmp_path / "m.sqlite"
    s = manifest.scan([str(cut)], m, val_fraction=0.0, filters=None, progress=False)
    assert (s["games"], s["incomplete_games"], s["problems"]) == (1, 1, 1)
    assert 0 < s["samples"] and manifest.problems(m)[0].startswith(f"{cut}:")
