"""python -m meeple_mahjong.corpus {scan,select,build,info}: MJAI logs -> manifest -> shards.

python -m meeple_mahjong.corpus scan logs/tenhou logs/selfplay@0.5 --manifest corpus/manifest.sqlite
python -m meeple_mahjong.corpus build --manifest corpus/manifest.sqlite --out corpus/shards
python -m meeple_mahjong.corpus info corpus/shards
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import manifest, shards


def _filters(a) -> dict | None:
    if a.no_filters:
        return None
    min_games = None if a.min_games is None else int(a.min_games)
    return {"min_games": min_games, "max_avg_rank": a.max_avg_rank,
            "max_deal_in_rate": a.max_deal_in_rate, "min_win_rate": a.min_win_rate}  # fmt: skip


def _bound(text: str) -> float | None:
    return None if text.lower() in ("none", "null", "off") else float(text)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m meeple_mahjong.corpus", description=__doc__.splitlines()[0]
    )
    sub = p.add_subparsers(dest="command", required=True)

    def split_args(s):
        s.add_argument("--val-fraction", type=float, default=0.1,
                       help="last fraction of games (by file mtime, path, game index) held out")  # fmt: skip
        d = manifest.PlayerFilter()
        s.add_argument("--min-games", type=_bound, default=d.min_games, help="'off' disables")
        s.add_argument("--max-avg-rank", type=_bound, default=d.max_avg_rank, help="1 = first")
        s.add_argument(
            "--max-deal-in-rate", type=_bound, default=d.max_deal_in_rate, help="per hand"
        )
        s.add_argument("--min-win-rate", type=_bound, default=d.min_win_rate, help="per hand")
        s.add_argument("--no-filters", action="store_true", help="keep every seat's decisions")

    s = sub.add_parser("scan", help="read logs into a manifest (games, players, problems)")
    s.add_argument(
        "sources", nargs="+", help="log files, folders or globs, each optionally PATH@WEIGHT"
    )
    s.add_argument("--manifest", type=Path, required=True)
    s.add_argument("--jobs", type=int, default=1, help="processes replaying logs")
    s.add_argument("--east-only", action="store_true", help="the logs' games are East-only")
    s.add_argument("--no-red", action="store_true", help="the logs' games have no red fives")
    split_args(s)
    s = sub.add_parser("select", help="redo the hold-out and the player filters of a manifest")
    s.add_argument("--manifest", type=Path, required=True)
    split_args(s)
    s = sub.add_parser("build", help="pack the kept samples of a manifest into shards")
    s.add_argument("--manifest", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--shard-size", type=int, default=16384, help="samples per shard")
    s.add_argument(
        "--jobs", type=int, default=1, help="processes replaying logs and writing shards"
    )
    s.add_argument(
        "--overwrite", action="store_true", help="replace shards built from another manifest"
    )
    s = sub.add_parser("info", help="what a built corpus (or a manifest) holds")
    s.add_argument("path", type=Path, help="a corpus folder, its shards folder (index.json) or a manifest file")
    s.add_argument("--problems", type=int, default=10, help="problems to list")
    s.add_argument("--players", type=int, default=10, help="kept players to list")
    return p


def _print_summary(summary: dict) -> None:
    for k, v in summary.items():
        print(f"{k:20s} {json.dumps(v) if isinstance(v, dict) else v}")


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.command == "scan":
            _print_summary(
                manifest.scan(
                    a.sources,
                    a.manifest,
                    val_fraction=a.val_fraction,
                    filters=_filters(a),
                    rules={"east_only": a.east_only, "red_fives": not a.no_red},
                    jobs=a.jobs,
                )
            )
            probs = manifest.problems(a.manifest, limit=10)
            for line in probs:
                print(f"problem: {line}")
        elif a.command == "select":
            _print_summary(
                manifest.select(a.manifest, val_fraction=a.val_fraction, filters=_filters(a))
            )
        elif a.command == "build":
            index = shards.build(
                a.manifest, a.out, shard_size=a.shard_size, overwrite=a.overwrite, jobs=a.jobs
            )
            for split in shards.SPLITS:
                n, b = index["samples"][split], index["bytes"][split]
                print(f"{split:5s} {len(index['shards'][split])} shards, {n} samples, "
                      f"{b / max(n, 1):.1f} bytes/sample")  # fmt: skip
            print(f"wrote {a.out / shards.INDEX_NAME}")
        else:
            if (a.path / "shards" / "index.json").is_file():  # a corpus folder (CorpusDataModule's)
                a.path = a.path / "shards"
            m = a.path
            if a.path.is_dir():
                index = shards.read_index(a.path)
                for split in shards.SPLITS:
                    print(f"{split:5s} games {index['games'][split]}, samples {index['samples'][split]}, "
                          f"shards {len(index['shards'][split])}, bytes {index['bytes'][split]}")  # fmt: skip
                m = Path(index["manifest"])
                if not m.is_file():
                    print(f"(manifest {m} not found)")
                    return 0
            _print_summary(manifest.summary(m))
            for name, games, rank, deal_in, win in manifest.kept_players(m, limit=a.players):
                print(f"kept: {name} ({games} training games, average rank {rank:.2f}, "
                      f"deal-in {deal_in if deal_in is None else round(deal_in, 3)}, "
                      f"win {win if win is None else round(win, 3)})")  # fmt: skip
            for line in manifest.problems(m, limit=a.problems):
                print(f"problem: {line}")
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
