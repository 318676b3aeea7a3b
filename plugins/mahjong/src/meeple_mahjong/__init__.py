"""meeple riichi mahjong: Python surface of the native engine in meeple_native.mahjong.

- tiles: `kind_to_mjai`, `tile_to_mjai`, `mjai_to_kind`, `parse_counts` (docs/mahjong_engine.md)
- `shanten(counts)` / `shanten_batch(array)`: table-based shanten with the four-copies limit
- `score_hand(closed, melds, win_tile, **conditions)`: yaku, fu, limits and payments
- `wall(session_seed, game, kyoku, honba)`: the deterministic 136-tile wall of one hand
- `Game`, `Action`: the game state machine (pending seats, legal actions, step, MJAI events)
- `encode_public` / `encode_oracle`: (84, 34) / (205, 34) float32 observation planes
  (docs/mahjong_encoding.md); `encode_lookahead`: (..., 5, 34) planes derived from public ones; `augment`: suit permutations of games, planes and actions
- bots: `bot_names()`, `bot_action(game, seat, bot, seed)`, `play_bots(game, bots, policy_seed)`
  (docs/mahjong_bots.md; 1v3 duplicate evaluation in meeple_mahjong.duplicate)
- action space: `action_index(action)`, `legal_mask(game, seat)`, `action_from_index(game, seat, i)`
  (155 indices, docs/mahjong_encoding.md); `BatchSim`: B tables per call for a learner, bots in
  the other seats (docs/mahjong_env.md); `env.MahjongEnv`: the TorchRL env of `env=mahjong`
  (`league_env.LeagueEnv` with `env.league=true`: league self-play, one rotating learner seat)
"""

from meeple_native import mahjong as _mj

from .tiles import kind_to_mjai, mjai_to_kind, parse_counts, tile_to_mjai

shanten = _mj.shanten
shanten_parts = _mj.shanten_parts
shanten_batch = _mj.shanten_batch
score_hand = _mj.score_hand
init_shanten_tables = _mj.init_shanten_tables
Game = _mj.Game
Action = _mj.Action
game_key = _mj.game_key
hand_key = _mj.hand_key
make_wall = _mj.make_wall
wall = _mj.wall
encode_public = _mj.encode_public
encode_oracle = _mj.encode_oracle
encode_lookahead = _mj.encode_lookahead
bench_encode = _mj.bench_encode
PUBLIC_PLANES: int = _mj.PUBLIC_PLANES
ORACLE_PLANES: int = _mj.ORACLE_PLANES
LOOKAHEAD_PLANES: int = _mj.LOOKAHEAD_PLANES
PLANE_WIDTH: int = _mj.PLANE_WIDTH
NUM_ACTIONS: int = _mj.NUM_ACTIONS
bot_names = _mj.bot_names
bot_action = _mj.bot_action
play_bots = _mj.play_bots
action_index = _mj.action_index
legal_mask = _mj.legal_mask
action_from_index = _mj.action_from_index
BatchSim = _mj.BatchSim
PASS_ACTION: int = _mj.PASS_ACTION

__all__ = [
    "PASS_ACTION",
    "BatchSim",
    "action_from_index",
    "action_index",
    "legal_mask",
    "NUM_ACTIONS",
    "ORACLE_PLANES",
    "LOOKAHEAD_PLANES",
    "PLANE_WIDTH",
    "PUBLIC_PLANES",
    "Action",
    "Game",
    "bench_encode",
    "encode_oracle",
    "encode_lookahead",
    "encode_public",
    "bot_action",
    "bot_names",
    "play_bots",
    "game_key",
    "hand_key",
    "make_wall",
    "wall",
    "init_shanten_tables",
    "kind_to_mjai",
    "mjai_to_kind",
    "parse_counts",
    "score_hand",
    "shanten",
    "shanten_batch",
    "shanten_parts",
    "tile_to_mjai",
]
