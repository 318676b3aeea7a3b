"""Play against a checkpoint in the browser (docs/viewer.md):

    python -m meeple.play outputs/runs/<run>             # the game the run trained on
    python -m meeple.play <ckpt.pt> --game <game> --seat 1 --port 8000 --seed 3

Serves a local page on 127.0.0.1 (:mod:`meeple.viewer.play_server`) and prints its URL. The game
comes from the checkpoint's config (an AlphaZero run's ``phase.game``, else its ``env.backend``)
unless ``--game`` names it; the game's plugin plays the checkpoint (entry points ``meeple.play``).
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any

from meeple.checkpoint.actor import checkpoint_file
from meeple.checkpoint.io import load_verified
from meeple.errors import MeepleError
from meeple.viewer.play_server import PlayServer
from meeple.viewer.play_session import load_play_factory
from meeple.viewer.renderers import renderer


def checkpoint_game(path: str) -> str:
    """The game a checkpoint (file or run directory) plays, from its saved config."""
    file = checkpoint_file(path)
    config = load_verified(file, map_location="cpu").get("config") or {}
    phase = config.get("phase") or {}
    game = phase.get("game") if phase.get("name") == "alphazero" else (config.get("env") or {}).get("backend")
    if not game:
        raise MeepleError(f"{file}: its config names no game (phase.game or env.backend); give --game")
    return str(game)


def build_server(checkpoint: str, *, game: str | None = None, port: int = 0, seat: int = 0, seed: int = 0,
                 opts: dict[str, Any] | None = None, factories: dict | None = None) -> PlayServer:
    """The server of a checkpoint's game; ``factories`` replaces the installed entry points."""
    game = game or checkpoint_game(checkpoint)
    factory = load_play_factory(game, factories)
    new_session = partial(_session, factory, checkpoint, seat, opts or {})
    return PlayServer(new_session, game, renderer(game), seed=seed, port=port)


def _session(factory: Any, checkpoint: str, seat: int, opts: dict[str, Any], seed: int) -> Any:
    return factory(checkpoint, seed=seed, human_seat=seat, **opts)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m meeple.play", description=__doc__.split("\n\n")[0].rstrip(":"))
    p.add_argument("checkpoint", help="a checkpoint file or a run directory (its newest stage)")
    p.add_argument("--game", default=None, help="the game (default: the one the checkpoint trained on)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: a free one)")
    p.add_argument("--seat", type=int, default=0, help="your seat (default 0: the first to move)")
    p.add_argument("--seed", type=int, default=0, help="the first game's seed (New game: the next)")
    p.add_argument("--simulations", type=int, default=None,
                   help="search simulations per agent move (the AlphaZero games; default: the game's)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not 0 <= args.port <= 65535:
        print(f"meeple: error: --port {args.port}; accepted: 0 (any free port) to 65535", file=sys.stderr)
        return 2
    opts = {} if args.simulations is None else {"simulations": args.simulations}
    try:
        server = build_server(args.checkpoint, game=args.game, port=args.port, seat=args.seat, seed=args.seed,
                              opts=opts)
    except (MeepleError, OSError) as err:
        print(f"meeple: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    print(f"meeple: playing {server.game} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
