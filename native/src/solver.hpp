// Exact Connect Four solver: negamax with alpha-beta pruning, null-window
// search on the score, a transposition table of bounds (a position and its
// mirror image share an entry), move ordering (threat count, then centre first)
// and pruning of moves that lose at once.
//
// Score convention (Pascal Pons'): from the side to move's view, positive =
// win, 0 = draw, negative = loss; magnitude = 22 - number of stones the winner
// has played when the game ends (faster wins score higher). For a position the
// opponent has just won, the score is -(22 - stones the opponent played).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "connect4.hpp"

namespace meeple::c4 {

// Transposition table: `size` slots (a prime > 2^17), each a 32-bit partial key
// and an 8-bit value. Keys are < 2^49 and the slot is key % size, so by the
// Chinese remainder theorem (key % 2^32, key % size) identifies the key: no
// false hits. Value 0 = empty.
class TranspositionTable {
 public:
  explicit TranspositionTable(std::size_t min_size);
  void clear();
  void put(std::uint64_t key, std::uint8_t value) {
    const std::size_t i = index(key);
    keys_[i] = static_cast<std::uint32_t>(key);
    values_[i] = value;
  }
  std::uint8_t get(std::uint64_t key) const {
    const std::size_t i = index(key);
    return keys_[i] == static_cast<std::uint32_t>(key) ? values_[i] : 0;
  }
  std::size_t size() const { return keys_.size(); }
  std::size_t bytes() const { return keys_.size() * (sizeof(std::uint32_t) + sizeof(std::uint8_t)); }

 private:
  std::size_t index(std::uint64_t key) const { return static_cast<std::size_t>(key % size_); }
  std::uint64_t size_;
  std::vector<std::uint32_t> keys_;
  std::vector<std::uint8_t> values_;
};

class Solver {
 public:
  static constexpr int kMinScore = -(kCells / 2) + 3;       // -18
  static constexpr int kMaxScore = (kCells + 1) / 2 - 3;    // 18

  // tt_log2: the table gets the smallest prime >= 2^tt_log2 slots (5 bytes each);
  // 23 (the default, ~40 MiB) is plenty for mid-game positions. Must be 18..30.
  explicit Solver(int tt_log2 = 23);

  // Exact score of a position (see the convention above). Terminal positions
  // are allowed: -(22 - winner's stones) after a win, 0 for a full board.
  int solve(const Connect4& pos);

  // Score of each column for the side to move (std::nullopt: illegal column).
  // A column's score is the score of the position after it, negated, from the
  // mover's view; its maximum equals solve(pos). Empty for terminal positions.
  std::array<std::optional<int>, kWidth> analyze(const Connect4& pos);

  // Optimal columns (0-based, increasing); empty for terminal positions.
  std::vector<int> best_moves(const Connect4& pos);

  void reset() { tt_.clear(); }
  std::uint64_t node_count() const { return nodes_; }
  void reset_node_count() { nodes_ = 0; }
  std::size_t tt_size() const { return tt_.size(); }
  std::size_t tt_bytes() const { return tt_.bytes(); }

 private:
  struct Pos;  // lean search position (no status tracking)
  int solve_nonterminal(const Pos& p);
  int negamax(const Pos& p, int alpha, int beta);

  TranspositionTable tt_;
  std::uint64_t nodes_ = 0;
};

}  // namespace meeple::c4
