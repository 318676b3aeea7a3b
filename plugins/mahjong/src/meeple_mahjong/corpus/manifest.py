"""The corpus manifest: one SQLite file listing every game of a set of MJAI logs, its players'
statistics, every problem met while reading, the chronological hold-out and the player filters.

    scan(["logs/tenhou@1.0", "logs/selfplay@0.5"], "corpus/manifest.sqlite")

A *source* is a file, a folder (searched recursively) or a glob, with a sample weight
(``PATH@WEIGHT``; default 1). A scan replays every game once through ``samples.log_games`` (the
sample counts are exact, so shard building can verify it reads what was scanned), then
:func:`select` splits and filters: the last ``val_fraction`` of games by order key (file mtime,
then path, then game index inside the file) is validation, and a player filter computed on the
training games only decides which seats' decisions are kept. ``select`` can be run again on an
existing manifest to change the split or the filters without rescanning.

The file is written to a temporary name and renamed, so a manifest on disk is always complete.
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import samples
from .parallel import ordered_map

SCHEMA_VERSION = 1
LOG_SUFFIXES = (".mjson", ".json", ".jsonl")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sources (id INTEGER PRIMARY KEY, spec TEXT NOT NULL, weight REAL NOT NULL);
CREATE TABLE files (id INTEGER PRIMARY KEY, source INTEGER NOT NULL REFERENCES sources(id),
    path TEXT NOT NULL UNIQUE, mtime REAL NOT NULL, size INTEGER NOT NULL);
CREATE TABLE games (id INTEGER PRIMARY KEY, file INTEGER NOT NULL REFERENCES files(id),
    game INTEGER NOT NULL, line INTEGER NOT NULL, names TEXT NOT NULL, complete INTEGER NOT NULL,
    hands INTEGER NOT NULL, samples INTEGER NOT NULL, chrono INTEGER NOT NULL DEFAULT 0,
    split TEXT NOT NULL DEFAULT 'train');
CREATE TABLE seats (game INTEGER NOT NULL REFERENCES games(id), seat INTEGER NOT NULL,
    name TEXT NOT NULL, rank INTEGER NOT NULL, score INTEGER NOT NULL, hands INTEGER NOT NULL,
    wins INTEGER NOT NULL, deal_ins INTEGER NOT NULL, riichi INTEGER NOT NULL,
    calls INTEGER NOT NULL, samples INTEGER NOT NULL, kept INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (game, seat));
CREATE TABLE players (name TEXT PRIMARY KEY, games INTEGER NOT NULL, avg_rank REAL,
    deal_in_rate REAL, win_rate REAL, kept INTEGER NOT NULL);
CREATE TABLE problems (file TEXT NOT NULL, line INTEGER, message TEXT NOT NULL);
"""


@dataclass(frozen=True)
class PlayerFilter:
    """Which players' decisions are kept; each bound ``None`` = off (the spec's defaults).

    Statistics come from the training games only: average rank is 1-based (1 = first), rates
    are per hand played.
    """

    min_games: int | None = 30
    max_avg_rank: float | None = 2.60
    max_deal_in_rate: float | None = 0.16
    min_win_rate: float | None = 0.17

    @classmethod
    def off(cls) -> PlayerFilter:
        return cls(None, None, None, None)

    @classmethod
    def from_dict(cls, d: dict | None) -> PlayerFilter:
        if d is None:
            return cls.off()
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown player filter key(s) {sorted(unknown)}; accepted: "
                f"{sorted(cls.__dataclass_fields__)} (each a number or null = off)"
            )
        return cls(**d)

    def passes(
        self, games: int, avg_rank: float | None, deal_in: float | None, win: float | None
    ) -> bool:
        if self.min_games is not None and games < self.min_games:
            return False
        checks = ((self.max_avg_rank, avg_rank, 1), (self.max_deal_in_rate, deal_in, 1),
                  (self.min_win_rate, win, -1))  # fmt: skip
        for bound, value, sign in checks:
            if bound is not None and (value is None or sign * (value - bound) > 1e-12):
                return False
        return True


@dataclass(frozen=True)
class Source:
    """Logs to read (a file, a folder searched recursively, or a glob) and their sample weight."""

    spec: str
    weight: float = 1.0

    @classmethod
    def parse(cls, text: str | Source) -> Source:
        if isinstance(text, Source):
            return text
        path, sep, weight = str(text).rpartition("@")
        if not sep:
            return cls(str(text))
        try:
            w = float(weight)
        except ValueError:
            raise ValueError(f"source {text!r}: the weight after '@' must be a number") from None
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"source {text!r}: the weight must be a finite number >= 0, got {w}")
        return cls(path, w)

    def files(self) -> list[Path]:
        p = Path(self.spec)
        if p.is_file():
            return [p]
        if p.is_dir():
            found = [f for f in p.rglob("*") if f.is_file() and is_log(f)]
        else:
            found = [Path(f) for f in glob.glob(self.spec, recursive=True) if is_log(Path(f))]
            if not found and not any(c in self.spec for c in "*?["):
                raise FileNotFoundError(f"source {self.spec!r}: no such file or folder")
        if not found:
            raise FileNotFoundError(
                f"source {self.spec!r}: no MJAI logs in it (accepted: "
                f"{', '.join(LOG_SUFFIXES)}, each optionally .gz)"
            )
        return sorted(found)


def is_log(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    # selfplay's summary.json and legal_dump's STEM.legal.json sit beside logs and are not logs
    skip = name == "summary.json" or name.endswith(".legal.json")
    return name.endswith(LOG_SUFFIXES) and not skip and path.is_file()


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    con.execute("PRAGMA foreign_keys = ON")
    return con


def open_manifest(path: str | Path) -> sqlite3.Connection:
    """A read connection to a manifest, after checking its schema version."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no corpus manifest at {path} (write one with `scan`)")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (version,) = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as e:
        con.close()
        raise ValueError(f"{path} is not a corpus manifest ({e})") from None
    if int(version) != SCHEMA_VERSION:
        con.close()
        raise ValueError(
            f"{path}: manifest schema version {version}, this code reads {SCHEMA_VERSION}; rescan"
        )
    return con


def scan(
    sources: Sequence[str | Source],
    manifest_path: str | Path,
    *,
    val_fraction: float = 0.1,
    filters: PlayerFilter | dict | None = PlayerFilter(),
    rules: dict | None = None,
    jobs: int = 1,
    progress: bool = True,
) -> dict:
    """Read every game of ``sources`` into a new manifest at ``manifest_path`` (``jobs``
    processes replay the logs); returns :func:`summary`."""
    srcs = [Source.parse(s) for s in sources]
    if not srcs:
        raise ValueError("scan needs at least one source (a log file, folder or glob)")
    manifest_path = Path(manifest_path)
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = manifest_path.with_name(f".{manifest_path.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    files: list[tuple[int, Path]] = []
    seen: set[Path] = set()
    for i, s in enumerate(srcs):
        for f in s.files():
            f = f.resolve()  # absolute: the build may run from another folder
            if f not in seen:  # a file named by two sources belongs to the first
                seen.add(f)
                files.append((i, f))
    try:
        con = _connect(tmp)
        con.executescript(_SCHEMA)
        con.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("schema_version", str(SCHEMA_VERSION)), ("rules", json.dumps(rules or {}))],
        )
        con.executemany(
            "INSERT INTO sources VALUES (?, ?, ?)",
            [(i, s.spec, s.weight) for i, s in enumerate(srcs)],
        )
        tasks = [(str(f), rules) for _, f in files]
        with progress_bar(progress, "scan", len(files)) as advance:
            for (src, f), (games, probs) in zip(files, ordered_map(_read_log, tasks, jobs)):
                st = f.stat()
                fid = con.execute(
                    "INSERT INTO files (source, path, mtime, size) VALUES (?, ?, ?, ?)",
                    (src, str(f), st.st_mtime, st.st_size),
                ).lastrowid
                con.executemany("INSERT INTO problems VALUES (?, ?, ?)", probs)
                for g in games:
                    _insert_game(con, fid, g)
                advance()
        con.commit()
        _select_and_publish(con, tmp, manifest_path, val_fraction, filters)
    finally:
        tmp.unlink(missing_ok=True)
    return summary(manifest_path)


def _read_log(task: tuple[str, dict | None]) -> tuple[list[dict], list[tuple]]:
    """One log's games (metadata and per-seat counts, no arrays) and problems; runs in a worker."""
    path, rules = task
    games, probs, noted = [], [], set()
    for item in samples.log_games(path, rules=rules):
        if isinstance(item, samples.GameSamples):
            seats = item.samples["seat"].tolist()
            games.append({
                "game": item.game, "line": item.line, "names": list(item.names),
                "complete": bool(item.complete), "hands": item.hands, "samples": len(seats),
                "per_seat": [seats.count(s) for s in range(4)], "seat_stats": item.seat_stats,
            })  # fmt: skip
            # a truncated game's note repeats its LogProblem
            probs += [(item.source, None, str(p)) for p in item.problems if str(p) not in noted]
        else:
            noted.add(str(item))
            probs.append((str(item.path), item.line, item.message))
    return games, probs


def _insert_game(con: sqlite3.Connection, fid: int, g: dict) -> None:
    gid = con.execute(
        "INSERT INTO games (file, game, line, names, complete, hands, samples) VALUES (?,?,?,?,?,?,?)",
        (fid, g["game"], g["line"], json.dumps(g["names"]), int(g["complete"]), g["hands"],
         g["samples"]),
    ).lastrowid  # fmt: skip
    con.executemany(
        "INSERT INTO seats (game, seat, name, rank, score, hands, wins, deal_ins, riichi, calls, samples)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [(gid, s, str(st["name"]), st["rank"], st["score"], st["hands"], st["wins"], st["deal_ins"],
          st["riichi"], st["calls"], g["per_seat"][s]) for s, st in enumerate(g["seat_stats"])],
    )  # fmt: skip


def select(
    manifest_path: str | Path,
    *,
    val_fraction: float = 0.1,
    filters: PlayerFilter | dict | None = PlayerFilter(),
) -> dict:
    """Redo the hold-out and the player filter of an existing manifest (atomically)."""
    manifest_path = Path(manifest_path)
    open_manifest(manifest_path).close()
    tmp = manifest_path.with_name(f".{manifest_path.name}.tmp-{os.getpid()}")
    try:
        src = sqlite3.connect(manifest_path)
        con = sqlite3.connect(tmp)
        src.backup(con)
        src.close()
        _select_and_publish(con, tmp, manifest_path, val_fraction, filters)
    finally:
        tmp.unlink(missing_ok=True)
    return summary(manifest_path)


def _select_and_publish(con: sqlite3.Connection, tmp: Path, manifest_path: Path, val_fraction: float,
                        filters: PlayerFilter | dict | None) -> None:
    """Hold-out and player filter into the temporary copy, then publish it in one rename."""
    if not isinstance(filters, PlayerFilter):
        filters = PlayerFilter.from_dict(filters)
    _select(con, val_fraction, filters)
    con.commit()
    con.close()
    os.replace(tmp, manifest_path)


def _select(con: sqlite3.Connection, val_fraction: float, filters: PlayerFilter) -> None:
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    order = [r[0] for r in con.execute(
        "SELECT g.id FROM games g JOIN files f ON g.file = f.id ORDER BY f.mtime, f.path, g.game")]  # fmt: skip
    n_val = int(round(len(order) * val_fraction))
    n_train = len(order) - n_val
    con.executemany(
        "UPDATE games SET chrono = ?, split = ? WHERE id = ?",
        [(i, "train" if i < n_train else "val", gid) for i, gid in enumerate(order)],
    )
    con.execute("DELETE FROM players")
    rows = con.execute(
        "SELECT s.name, COUNT(*), AVG(s.rank + 1.0), SUM(s.deal_ins), SUM(s.wins), SUM(s.hands) "
        "FROM seats s JOIN games g ON s.game = g.id WHERE g.split = 'train' GROUP BY s.name"
    ).fetchall()
    kept: set[str] = set()
    for name, games, avg_rank, deal_ins, wins, hands in rows:
        deal_in = deal_ins / hands if hands else None
        win = wins / hands if hands else None
        ok = filters.passes(games, avg_rank, deal_in, win)
        con.execute("INSERT INTO players VALUES (?, ?, ?, ?, ?, ?)",
                    (name, games, avg_rank, deal_in, win, int(ok)))  # fmt: skip
        if ok:
            kept.add(name)
    filtering = filters != PlayerFilter.off()
    con.execute("UPDATE seats SET kept = 1")
    if filtering:  # a player seen only in validation games has no training statistics: not kept
        con.execute("UPDATE seats SET kept = (name IN (SELECT name FROM players WHERE kept = 1))")
    con.executemany(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
        [("val_fraction", repr(val_fraction)), ("filters", json.dumps(asdict(filters)))],
    )


def summary(manifest_path: str | Path) -> dict:
    """Counts: files, games, samples (all and kept, per split), players kept, problems."""
    con = open_manifest(manifest_path)
    try:
        one = lambda q: con.execute(q).fetchone()[0]  # noqa: E731
        out = {
            "manifest": str(manifest_path),
            "files": one("SELECT COUNT(*) FROM files"),
            "games": one("SELECT COUNT(*) FROM games"),
            "incomplete_games": one("SELECT COUNT(*) FROM games WHERE complete = 0"),
            "samples": one("SELECT COALESCE(SUM(samples), 0) FROM games"),
            "players": one("SELECT COUNT(*) FROM players"),
            "players_kept": one("SELECT COUNT(*) FROM players WHERE kept = 1"),
            "problems": one("SELECT COUNT(*) FROM problems"),
            "filters": json.loads(one("SELECT value FROM meta WHERE key = 'filters'")),
            "val_fraction": float(one("SELECT value FROM meta WHERE key = 'val_fraction'")),
        }
        for split in ("train", "val"):
            g, kept = con.execute(
                "SELECT COUNT(DISTINCT g.id), COALESCE(SUM(s.samples * s.kept), 0) FROM games g "
                "JOIN seats s ON s.game = g.id WHERE g.split = ?", (split,)).fetchone()  # fmt: skip
            out[f"{split}_games"] = g
            out[f"{split}_samples_kept"] = kept
        return out
    finally:
        con.close()


def kept_players(manifest_path: str | Path, limit: int | None = None) -> list[tuple]:
    """(name, training games, average rank, deal-in rate, win rate) of kept players, most games first."""
    con = open_manifest(manifest_path)
    try:
        q = "SELECT name, games, avg_rank, deal_in_rate, win_rate FROM players WHERE kept = 1 ORDER BY games DESC, name"
        return con.execute(q + (f" LIMIT {int(limit)}" if limit else "")).fetchall()
    finally:
        con.close()


def problems(manifest_path: str | Path, limit: int | None = None) -> list[str]:
    con = open_manifest(manifest_path)
    try:
        q = "SELECT file, line, message FROM problems ORDER BY rowid"
        rows = con.execute(q + (f" LIMIT {int(limit)}" if limit else "")).fetchall()
        # a game's own notes already read "file:line: message"
        return [f"{f}:{line}: {m}" if line is not None else m if m.startswith(f) else f"{f}: {m}"
                for f, line, m in rows]  # fmt: skip
    finally:
        con.close()


@dataclass(frozen=True)
class GameEntry:
    """One game as the shard builder needs it."""

    id: int
    file: str
    game: int
    samples: int  # all decisions of the game
    split: str
    weight: float
    kept_seats: tuple[int, ...]
    kept: int  # decisions of the kept seats


def games(manifest_path: str | Path) -> list[GameEntry]:
    """Every game in chronological order (a file's games are consecutive in it)."""
    con = open_manifest(manifest_path)
    try:
        rows = con.execute(
            "SELECT g.id, f.path, g.game, g.samples, g.split, src.weight, "
            "(SELECT GROUP_CONCAT(seat) FROM seats s WHERE s.game = g.id AND s.kept = 1), "
            "(SELECT COALESCE(SUM(samples), 0) FROM seats s WHERE s.game = g.id AND s.kept = 1) "
            "FROM games g JOIN files f ON g.file = f.id JOIN sources src ON f.source = src.id "
            "ORDER BY g.chrono"
        ).fetchall()
    finally:
        con.close()
    out = []
    for gid, path, game, n, split, w, seats, kept in rows:
        seats_kept = tuple(sorted(int(s) for s in seats.split(","))) if seats else ()
        out.append(GameEntry(gid, path, game, n, split, w, seats_kept, kept))
    return out


def games_by_file(manifest_path: str | Path) -> dict[str, list[GameEntry]]:
    """:func:`games` grouped by file, files in chronological order."""
    out: dict[str, list[GameEntry]] = {}
    for e in games(manifest_path):
        out.setdefault(e.file, []).append(e)
    return out


@contextlib.contextmanager
def progress_bar(enabled: bool, label: str, total: int):
    """``with progress_bar(...) as advance``: a rich bar (plain lines in a log file) advanced by
    ``advance(n=1)``; nothing shown when ``enabled`` is False."""
    if not enabled:
        yield lambda n=1: None
        return
    from meeple.cli_progress import task_progress

    with task_progress() as p:
        task = p.add_task(label, total=total)
        yield lambda n=1: p.advance(task, n)
