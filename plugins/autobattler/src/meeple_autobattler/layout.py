"""The auto-battler's observation and action layout (docs/autobattler.md), as the TypeScript game
writes it (plugins/remote/node/src/games/autobattler/game.ts; a test compares the two)."""

BOARD, BENCH, SHOP, PLAYERS = 16, 4, 5, 8
NUM_KINDS, MAX_STAR = 12, 3
UNIT_FEATURES = 1 + NUM_KINDS + MAX_STAR  # present, kind one-hot, star one-hot
O_UNITS = 0  # board cells, then bench slots, then shop slots
O_SELF = O_UNITS + (BOARD + BENCH + SHOP) * UNIT_FEATURES
O_TYPES = O_SELF + 16
O_POOL = O_TYPES + 4
O_OPPONENTS = O_POOL + NUM_KINDS
OPPONENT_FEATURES = 8 + NUM_KINDS + 4
O_FIGHT = O_OPPONENTS + (PLAYERS - 1) * OPPONENT_FEATURES
OBS_SIZE = O_FIGHT + 5 + PLAYERS - 1
START_HP, MAX_LEVEL, XP_COST, REROLL_COST = 40, 8, 4, 2

A_END, A_REROLL, A_XP = 0, 1, 2
A_BUY = 3
A_SELL_BENCH = A_BUY + SHOP
A_SELL_BOARD = A_SELL_BENCH + BENCH
A_SWAP = A_SELL_BOARD + BOARD  # + bench * BOARD + cell
NUM_ACTIONS = A_SWAP + BENCH * BOARD

# self block fields (O_SELF + i)
SELF_HP, SELF_GOLD, SELF_LEVEL = 0, 1, 2


def unit_slot(slot: int) -> int:
    """Offset of unit slot ``slot`` (board 0..15, bench 16..19, shop 20..24)."""
    return O_UNITS + slot * UNIT_FEATURES


def tier_of_kind(kind: int) -> int:
    return kind // 4 + 1
