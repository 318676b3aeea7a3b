"""League self-play (phase=league): PPO against a pool of frozen networks with ratings (docs/league.md)."""
