"""League self-play (mahjong phase 3): snapshot pool, ratings and the phase module."""
