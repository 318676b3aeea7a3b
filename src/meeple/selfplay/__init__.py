"""Self-play: network evaluators for native search, players and matches, Connect Four benchmarks."""
