// Chess as a game of the generic search: GameTraits<chess::Game> for
// mcts::Tree and mcts::SelfPlayEngine (same mechanism as Connect Four).
#pragma once

#include "chess/game.hpp"
#include "mcts.hpp"

namespace meeple::mcts {

template <>
struct GameTraits<chess::Game> {
  static constexpr int kNumActions = chess::kNumActions;          // 4672
  static constexpr int kMaxLegal = chess::MoveList::kCapacity;    // 256 (218 is the known maximum)
  // The automatic 50-move draw bounds a game: every 100 plies a pawn moves or
  // a piece is captured, at most 16 * 6 pawn steps + 30 captures.
  static constexpr int kMaxGameLength = 100 * (16 * 6 + 30 + 1);
  static constexpr int kNumPlanes = chess::kNumPlanes;            // 119
  static constexpr int kObsHeight = 8;
  static constexpr int kObsWidth = 8;
  static constexpr int kObsSize = kNumPlanes * kObsHeight * kObsWidth;
};

}  // namespace meeple::mcts
