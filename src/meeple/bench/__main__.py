"""``python -m meeple.bench [NAME [ARGS...]]``: list the benchmarks, or run one."""

from __future__ import annotations

import sys

from meeple.bench import Benchmark, benchmarks


def usage(available: dict[str, Benchmark]) -> str:
    lines = ["usage: python -m meeple.bench NAME [ARGS...]   (NAME --help for its options)", "", "benchmarks:"]
    width = max(map(len, available))
    lines += [f"  {name:<{width}}  {bench.description}" for name, bench in sorted(available.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    available = benchmarks()
    if not argv or argv[0] in ("-h", "--help", "list"):
        print(usage(available))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in available:
        print(
            f"meeple.bench: error: unknown benchmark {name!r}; available: {', '.join(sorted(available))}",
            file=sys.stderr,
        )
        return 2
    return available[name].load()(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
