"""meeple chess: the AlphaZero game on ``meeple_native.chess`` (entry point ``meeple.games: chess``)."""
