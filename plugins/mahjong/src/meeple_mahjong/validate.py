"""Replay MJAI logs through the engine: python -m meeple_mahjong.validate LOG [LOG ...].

Prints one line per log (ok, or the first bad event's line number and why) and exits 1
when any log fails. Logs may be gzip-compressed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .mjai import replay_file


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m meeple_mahjong.validate", description=__doc__.splitlines()[0]
    )
    p.add_argument("logs", nargs="+", type=Path, help=".mjson or .mjson.gz files")
    p.add_argument("--east-only", action="store_true", help="the games are East-only")
    p.add_argument("--no-red", action="store_true", help="the games have no red fives")
    a = p.parse_args(argv)
    failed = 0
    for path in a.logs:
        report = replay_file(path, east_only=a.east_only, red_fives=not a.no_red)
        print(f"{path}: {report}")
        failed += not report.ok
    if len(a.logs) > 1:
        print(f"{len(a.logs) - failed}/{len(a.logs)} logs replayed cleanly")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
