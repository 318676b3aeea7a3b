"""``python -m meeple.bench [NAME [ARGS...]]``: list the benchmarks, or run one."""

from __future__ import annotations

import importlib
import sys

from meeple.bench import BENCHMARKS


def usage() -> str:
    lines = ["usage: python -m meeple.bench NAME [ARGS...]   (NAME --help for its options)", "", "benchmarks:"]
    width = max(map(len, BENCHMARKS))
    lines += [f"  {name:<{width}}  {description}" for name, (_, description) in sorted(BENCHMARKS.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(
            f"meeple.bench: error: unknown benchmark {name!r}; available: {', '.join(sorted(BENCHMARKS))}",
            file=sys.stderr,
        )
        return 2
    module = importlib.import_module(BENCHMARKS[name][0])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
