#include "solver.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace meeple::c4 {

namespace {

bool is_prime(std::uint64_t n) {
  if (n < 2) return false;
  for (std::uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

std::uint64_t next_prime(std::uint64_t n) {
  while (!is_prime(n)) ++n;
  return n;
}

// Columns explored first to last when threat counts tie: centre first.
constexpr int kColumnOrder[kWidth] = {3, 2, 4, 1, 5, 0, 6};

// Sorts at most kWidth moves by score (insertion sort); pops the best first and,
// among equal scores, the one added last.
class MoveSorter {
 public:
  void add(Bitboard move, int score) {
    int pos = size_++;
    for (; pos > 0 && entries_[pos - 1].score > score; --pos) entries_[pos] = entries_[pos - 1];
    entries_[pos] = {move, score};
  }
  Bitboard next() { return size_ ? entries_[--size_].move : 0; }

 private:
  struct Entry {
    Bitboard move;
    int score;
  };
  Entry entries_[kWidth];
  int size_ = 0;
};

}  // namespace

TranspositionTable::TranspositionTable(std::size_t min_size)
    : size_(next_prime(min_size)), keys_(size_, 0), values_(size_, 0) {}

void TranspositionTable::clear() {
  std::fill(keys_.begin(), keys_.end(), 0u);
  std::fill(values_.begin(), values_.end(), std::uint8_t{0});
}

struct Solver::Pos {
  Bitboard current;  // stones of the side to move
  Bitboard mask;     // all stones
  int moves;

  Bitboard key() const { return current + mask; }
  // Key shared by a position and its mirror image (same score): the smaller one.
  Bitboard symmetric_key() const {
    const Bitboard k = key();
    Bitboard m = 0;
    for (int c = 0; c < kWidth; ++c)
      m |= ((k >> (c * (kHeight + 1))) & 0x7F) << ((kWidth - 1 - c) * (kHeight + 1));
    return m < k ? m : k;
  }
  Bitboard possible() const { return (mask + kBottomMask) & kBoardMask; }
  bool can_win_next() const { return winning_cells(current, mask) & possible(); }

  // Playable cells that do not hand the opponent an immediate win; 0 when every
  // move loses at once (two open threats, or a forced block under a threat).
  Bitboard non_losing_moves() const {
    Bitboard moves_mask = possible();
    const Bitboard opponent_win = winning_cells(current ^ mask, mask);
    const Bitboard forced = moves_mask & opponent_win;
    if (forced) {
      if (forced & (forced - 1)) return 0;  // two threats to block: lost
      moves_mask = forced;
    }
    return moves_mask & ~(opponent_win >> 1);  // never play right below an opponent threat
  }

  // Threats (winning cells) the side to move has after playing `move`.
  int move_score(Bitboard move) const { return popcount(winning_cells(current | move, mask)); }

  void play(Bitboard move) {
    current ^= mask;
    mask |= move;
    ++moves;
  }
};

Solver::Solver(int tt_log2) : tt_((tt_log2 >= 18 && tt_log2 <= 30)
                                      ? (std::size_t{1} << tt_log2)
                                      : throw std::invalid_argument(
                                            "tt_log2 must be in 18..30, got " +
                                            std::to_string(tt_log2))) {}

// Precondition: the side to move cannot win with its next move.
int Solver::negamax(const Pos& p, int alpha, int beta) {
  ++nodes_;
  const Bitboard next = p.non_losing_moves();
  if (next == 0) return -(kCells - p.moves) / 2;  // the opponent wins with its next stone
  if (p.moves >= kCells - 2) return 0;            // nobody can win any more

  int lo = std::max(-(kCells - 2 - p.moves) / 2, kMinScore);  // we survive the opponent's next move
  if (alpha < lo) {
    alpha = lo;
    if (alpha >= beta) return alpha;
  }
  int hi = std::min((kCells - 1 - p.moves) / 2, kMaxScore);  // we cannot win at once
  if (beta > hi) {
    beta = hi;
    if (alpha >= beta) return beta;
  }

  const Bitboard key = p.symmetric_key();
  if (const int v = tt_.get(key)) {
    if (v > kMaxScore - kMinScore + 1) {  // lower bound
      lo = v + 2 * kMinScore - kMaxScore - 2;
      if (alpha < lo) {
        alpha = lo;
        if (alpha >= beta) return alpha;
      }
    } else {  // upper bound
      hi = v + kMinScore - 1;
      if (beta > hi) {
        beta = hi;
        if (alpha >= beta) return beta;
      }
    }
  }

  MoveSorter moves;
  for (int i = kWidth - 1; i >= 0; --i) {
    if (const Bitboard move = next & column_mask(kColumnOrder[i])) moves.add(move, p.move_score(move));
  }
  while (const Bitboard move = moves.next()) {
    Pos child = p;
    child.play(move);
    const int score = -negamax(child, -beta, -alpha);
    if (score >= beta) {
      tt_.put(key, static_cast<std::uint8_t>(score + kMaxScore - 2 * kMinScore + 2));
      return score;
    }
    if (score > alpha) alpha = score;
  }
  tt_.put(key, static_cast<std::uint8_t>(alpha - kMinScore + 1));
  return alpha;
}

int Solver::solve_nonterminal(const Pos& p) {
  if (p.can_win_next()) return (kCells + 1 - p.moves) / 2;
  int lo = std::max(-(kCells - p.moves) / 2, kMinScore);
  int hi = std::min((kCells + 1 - p.moves) / 2, kMaxScore);
  // Null-window searches narrow [lo, hi]; probing near 0 first finds the sign
  // quickly, then moves towards the bound being tested.
  while (lo < hi) {
    int med = lo + (hi - lo) / 2;
    if (med <= 0 && lo / 2 < med)
      med = lo / 2;
    else if (med >= 0 && hi / 2 > med)
      med = hi / 2;
    const int r = negamax(p, med, med + 1);
    if (r <= med)
      hi = r;
    else
      lo = r;
  }
  return lo;
}

int Solver::solve(const Connect4& pos) {
  switch (pos.status()) {
    case Status::kFirstWon:
    case Status::kSecondWon:
      return -(kCells / 2 + 1 - (pos.moves_played() + 1) / 2);
    case Status::kDraw:
      return 0;
    default:
      break;
  }
  return solve_nonterminal(Pos{pos.current(), pos.mask(), pos.moves_played()});
}

std::array<std::optional<int>, kWidth> Solver::analyze(const Connect4& pos) {
  std::array<std::optional<int>, kWidth> out{};
  if (pos.is_terminal()) return out;
  for (int col = 0; col < kWidth; ++col) {
    if (!pos.can_play(col)) continue;
    if (pos.is_winning_move(col)) {
      out[col] = (kCells + 1 - pos.moves_played()) / 2;
      continue;
    }
    Connect4 child = pos;
    child.play(col);
    out[col] = -solve(child);
  }
  return out;
}

std::vector<int> Solver::best_moves(const Connect4& pos) {
  const auto scores = analyze(pos);
  std::vector<int> best;
  int best_score = 0;
  for (int col = 0; col < kWidth; ++col) {
    if (!scores[col]) continue;
    if (best.empty() || *scores[col] > best_score) {
      best.assign(1, col);
      best_score = *scores[col];
    } else if (*scores[col] == best_score) {
      best.push_back(col);
    }
  }
  return best;
}

}  // namespace meeple::c4
