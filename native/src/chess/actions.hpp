// The 4,672-move policy encoding (AlphaZero's 8 x 8 x 73): action =
// move_type * 64 + from_square, both from the mover's point of view (the board
// flipped vertically when black moves, square s -> s ^ 56). docs/chess.md has
// the table of move types.
//
//   0 .. 55   queen-like moves: direction * 7 + (distance - 1), directions
//             N, NE, E, SE, S, SW, W, NW (N = towards the opponent). Pawn pushes,
//             captures, king steps, castling (the king's two-square move) and
//             promotions to a queen are queen-like moves too.
//   56 .. 63  knight jumps, (files, ranks) = (+1,+2) (+2,+1) (+2,-1) (+1,-2)
//             (-1,-2) (-2,-1) (-2,+1) (-1,+2)
//   64 .. 72  underpromotions: 64 + 3 * piece + direction, piece 0 = knight,
//             1 = bishop, 2 = rook; direction 0 = capture towards file a (from
//             the mover's view), 1 = straight, 2 = capture towards file h.
//
// Ordering the index type-major makes the policy reshape to (73, 8, 8), the
// shape of a convolutional policy head.
#pragma once

#include "chess/position.hpp"

namespace meeple::chess {

inline constexpr int kNumMoveTypes = 73;
inline constexpr int kNumActions = kNumMoveTypes * 64;  // 4672

// Action index of a move made by `mover` (any legal move has one); -1 if the
// move is no queen-like move, knight jump or underpromotion.
int move_to_action(Move m, Color mover);

// The move an action stands for in `pos` (its side to move is the mover): a
// queen-like move of a pawn to the last rank is the queen promotion. Returns
// false if the action leaves the board; the move need not be legal.
bool action_to_move(int action, const Position& pos, Move& out);

}  // namespace meeple::chess
