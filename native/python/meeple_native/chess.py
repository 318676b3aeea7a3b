"""Chess in the native core: rules, perft, AlphaZero planes, 4,672-move policy, self-play.

``Board`` plays a game with every rule (draws by the 50-move rule and threefold repetition
end the game at once); ``perft(fen, depth)`` counts move-tree leaves (releases the GIL);
``Board.encode(out)`` writes the (119, 8, 8) input planes and ``Board.legal_mask(out)`` the
(4672,) legal-move mask into caller-provided arrays; ``SelfPlay`` runs the generic batched
MCTS self-play engine on chess and ``MCTS`` searches one position (evaluator, uniform or
random playouts). Layouts and rules: docs/chess.md.
"""

from ._core.chess import (
    MCTS,
    NUM_ACTIONS,
    NUM_PLANES,
    PLANES_SHAPE,
    START_FEN,
    Board,
    SelfPlay,
    perft,
)

__all__ = ["MCTS", "NUM_ACTIONS", "NUM_PLANES", "PLANES_SHAPE", "START_FEN", "Board", "SelfPlay", "perft"]
