// Connect Four (7 columns x 6 rows) on bitboards.
//
// Layout (Pascal Pons' layout): one 64-bit word, 7 bits per column, column c
// occupies bits [7c, 7c + 6]; bit 7c + r is the cell of column c at height r
// (r = 0 is the bottom row). The 7th bit of each column is a sentinel row that
// is always empty, so shifts used by the alignment test never bleed from one
// column into the next.
//
// A state is two words: `current_` = stones of the side to move, `mask_` = all
// stones. The opponent's stones are `current_ ^ mask_`. The state is a small,
// trivially copyable value (24 bytes): search code copies it instead of undoing.
//
// This header is the game interface a generic search (MCTS) can rely on:
//   kNumActions, legal_mask(), legal_moves(), is_legal(a), play(a),
//   is_terminal(), terminal_value(), to_play(), key(), encode(float*).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace meeple::c4 {

inline constexpr int kWidth = 7;
inline constexpr int kHeight = 6;
inline constexpr int kCells = kWidth * kHeight;
inline constexpr int kNumActions = kWidth;
// Observation planes written by Connect4::encode, shape (kNumPlanes, kHeight, kWidth).
inline constexpr int kNumPlanes = 3;

using Bitboard = std::uint64_t;

namespace detail {
constexpr Bitboard bottom_mask() {
  Bitboard m = 0;
  for (int c = 0; c < kWidth; ++c) m |= Bitboard{1} << (c * (kHeight + 1));
  return m;
}
}  // namespace detail

inline constexpr Bitboard kBottomMask = detail::bottom_mask();
inline constexpr Bitboard kBoardMask = kBottomMask * ((Bitboard{1} << kHeight) - 1);

constexpr Bitboard top_mask_col(int col) {
  return Bitboard{1} << ((kHeight - 1) + col * (kHeight + 1));
}
constexpr Bitboard bottom_mask_col(int col) { return Bitboard{1} << (col * (kHeight + 1)); }
constexpr Bitboard column_mask(int col) {
  return ((Bitboard{1} << kHeight) - 1) << (col * (kHeight + 1));
}
constexpr Bitboard cell_bit(int col, int row) {
  return Bitboard{1} << (col * (kHeight + 1) + row);
}

inline int popcount(Bitboard b) { return __builtin_popcountll(b); }

// True if `stones` contains four in a row (any direction).
constexpr bool has_alignment(Bitboard stones) {
  // horizontal (shift by one column = kHeight + 1), diagonals (kHeight, kHeight + 2), vertical (1)
  constexpr int kShifts[4] = {kHeight + 1, kHeight, kHeight + 2, 1};
  for (int s : kShifts) {
    const Bitboard m = stones & (stones >> s);
    if (m & (m >> (2 * s))) return true;
  }
  return false;
}

// Empty cells (on the board, possibly not yet playable) that would complete an
// alignment of four for the player owning `stones`; `mask` = all stones.
constexpr Bitboard winning_cells(Bitboard stones, Bitboard mask) {
  // vertical: three stacked stones, the cell above them
  Bitboard r = (stones << 1) & (stones << 2) & (stones << 3);

  // horizontal and the two diagonals
  constexpr int kShifts[3] = {kHeight + 1, kHeight, kHeight + 2};
  for (int s : kShifts) {
    Bitboard p = (stones << s) & (stones << (2 * s));
    r |= p & (stones << (3 * s));  // xxx. -> cell right of three
    r |= p & (stones >> s);        // xx.x
    p = (stones >> s) & (stones >> (2 * s));
    r |= p & (stones << s);         // x.xx
    r |= p & (stones >> (3 * s));  // .xxx
  }
  return r & (kBoardMask ^ mask);
}

// Outcome of a state from the absolute point of view.
enum class Status : std::int8_t { kOngoing = 0, kFirstWon = 1, kSecondWon = 2, kDraw = 3 };

class Connect4 {
 public:
  constexpr Connect4() = default;

  // Raw constructor (no validation of reachability); used by the solver and pickling.
  static constexpr Connect4 from_bitboards(Bitboard current, Bitboard mask, int moves) {
    Connect4 s;
    s.current_ = current;
    s.mask_ = mask;
    s.moves_ = static_cast<std::int8_t>(moves);
    s.status_ = s.compute_status();
    return s;
  }

  // Parse a string of 1-based columns ('1'..'7'). Throws std::invalid_argument
  // naming the bad character / full column / move after the end and its index.
  static Connect4 from_moves(const std::string& moves);

  // ---- queries -------------------------------------------------------------
  constexpr int moves_played() const { return moves_; }
  // 0 = first player to move, 1 = second player to move.
  constexpr int to_play() const { return moves_ & 1; }
  constexpr Bitboard current() const { return current_; }
  constexpr Bitboard mask() const { return mask_; }
  constexpr Bitboard opponent() const { return current_ ^ mask_; }
  constexpr Status status() const { return status_; }
  constexpr bool is_terminal() const { return status_ != Status::kOngoing; }

  // Winner as a player index (0 = first, 1 = second), or -1 (no winner: ongoing or draw).
  constexpr int winner() const {
    switch (status()) {
      case Status::kFirstWon: return 0;
      case Status::kSecondWon: return 1;
      default: return -1;
    }
  }

  // Value of a terminal state for the side to move: -1 (the opponent just won)
  // or 0 (draw). 0 for non-terminal states.
  constexpr int terminal_value() const {
    return (status() == Status::kFirstWon || status() == Status::kSecondWon) ? -1 : 0;
  }

  constexpr bool can_play(int col) const { return (mask_ & top_mask_col(col)) == 0; }
  constexpr bool is_legal(int col) const {
    return col >= 0 && col < kWidth && !is_terminal() && can_play(col);
  }
  // Bit c set iff column c is a legal move (0 when the game is over).
  constexpr unsigned legal_mask() const {
    if (is_terminal()) return 0;
    unsigned m = 0;
    for (int c = 0; c < kWidth; ++c)
      if (can_play(c)) m |= 1u << c;
    return m;
  }
  // Writes legal columns in increasing order into out[0..n), returns n (<= kNumActions).
  int legal_moves(int* out) const {
    int n = 0;
    const unsigned m = legal_mask();
    for (int c = 0; c < kWidth; ++c)
      if (m & (1u << c)) out[n++] = c;
    return n;
  }
  // Stone height of a column (0..kHeight).
  int height(int col) const { return popcount(mask_ & column_mask(col)); }

  // Unique key of the stones on the board: current + mask (< 2^49). The side to
  // move is implied by the number of stones, so equal keys <=> equal positions.
  constexpr Bitboard key() const { return current_ + mask_; }

  // Would playing `col` (legal) win immediately for the side to move?
  constexpr bool is_winning_move(int col) const {
    return winning_cells(current_, mask_) & ((mask_ + bottom_mask_col(col)) & column_mask(col));
  }

  // ---- mutation ------------------------------------------------------------
  // Plays a legal column (unchecked: callers check is_legal).
  constexpr void play(int col) {
    const Bitboard move = (mask_ + bottom_mask_col(col)) & column_mask(col);
    current_ ^= mask_;  // switch to the opponent's stones ...
    mask_ |= move;      // ... the mover's stones are now current_ ^ mask_
    ++moves_;
    if (has_alignment(current_ ^ mask_)) {
      status_ = (moves_ & 1) ? Status::kFirstWon : Status::kSecondWon;
    } else if (moves_ == kCells) {
      status_ = Status::kDraw;
    }
  }
  // Checked play: throws std::invalid_argument with a clear message.
  void play_checked(int col);

  // ---- observation ---------------------------------------------------------
  // Writes kNumPlanes x kHeight x kWidth float32 values (C order) into out:
  //   plane 0: stones of the side to move (1.0 / 0.0)
  //   plane 1: stones of the opponent
  //   plane 2: constant 1.0
  // Row 0 is the TOP row of the board (as printed), row 5 the bottom row;
  // column j is board column j (0-based, left to right).
  void encode(float* out) const {
    const Bitboard me = current_;
    const Bitboard opp = current_ ^ mask_;
    constexpr int kPlane = kHeight * kWidth;
    for (int row = 0; row < kHeight; ++row) {
      const int h = kHeight - 1 - row;
      for (int col = 0; col < kWidth; ++col) {
        const Bitboard b = cell_bit(col, h);
        const int i = row * kWidth + col;
        out[i] = (me & b) ? 1.0f : 0.0f;
        out[kPlane + i] = (opp & b) ? 1.0f : 0.0f;
        out[2 * kPlane + i] = 1.0f;
      }
    }
  }

  // Multi-line text board: 'X' = first player, 'O' = second player, '.' empty.
  std::string board_string() const;

  friend constexpr bool operator==(const Connect4& a, const Connect4& b) {
    return a.current_ == b.current_ && a.mask_ == b.mask_;
  }

 private:
  constexpr Status compute_status() const {
    if (moves_ > 0 && has_alignment(current_ ^ mask_))
      return (moves_ & 1) ? Status::kFirstWon : Status::kSecondWon;
    if (moves_ >= kCells) return Status::kDraw;
    return Status::kOngoing;
  }

  Bitboard current_ = 0;
  Bitboard mask_ = 0;
  std::int8_t moves_ = 0;
  Status status_ = Status::kOngoing;
};

}  // namespace meeple::c4
