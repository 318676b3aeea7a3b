"""meeple riichi mahjong: Python surface of the native engine in meeple_native.mahjong.

- tiles: `kind_to_mjai`, `tile_to_mjai`, `mjai_to_kind`, `parse_counts` (docs/mahjong_engine.md)
- `shanten(counts)` / `shanten_batch(array)`: table-based shanten with the four-copies limit
- `score_hand(closed, melds, win_tile, **conditions)`: yaku, fu, limits and payments
- `wall(session_seed, game, kyoku, honba)`: the deterministic 136-tile wall of one hand
- `Game`, `Action`: the game state machine (pending seats, legal actions, step, MJAI events)
- bots: `bot_names()`, `bot_action(game, seat, bot, seed)`, `play_bots(game, bots, policy_seed)`
  (docs/mahjong_bots.md; 1v3 duplicate evaluation in meeple_mahjong.duplicate)
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
bot_names = _mj.bot_names
bot_action = _mj.bot_action
play_bots = _mj.play_bots

__all__ = [
    "Action",
    "Game",
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
