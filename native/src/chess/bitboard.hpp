// Chess bitboards: squares, attack tables, sliding attacks by magic bitboards.
//
// Squares are numbered a1 = 0, b1 = 1, ..., h1 = 7, a2 = 8, ..., h8 = 63
// (little-endian rank-file), so bit s of a Bitboard is square s and flipping
// the board vertically (white's view <-> black's view) is `s ^ 56` for one
// square and a byte swap for a whole Bitboard.
//
// Sliding attacks use "fancy" magic bitboards: per square, the relevant
// blockers are multiplied by a magic number whose top bits index a table of
// precomputed attack sets. The magics are searched at start-up with a fixed
// seed (a few milliseconds), so nothing here is a copied table.
#pragma once

#include <cstdint>

namespace meeple::chess {

using Bitboard = std::uint64_t;

enum Color : int { kWhite = 0, kBlack = 1 };
enum PieceType : int { kPawn = 0, kKnight = 1, kBishop = 2, kRook = 3, kQueen = 4, kKing = 5, kNoPieceType = 6 };

constexpr Color operator~(Color c) { return static_cast<Color>(c ^ 1); }

inline constexpr Bitboard kFileA = 0x0101010101010101ULL;
inline constexpr Bitboard kFileH = kFileA << 7;
inline constexpr Bitboard kRank1 = 0xFFULL;
inline constexpr Bitboard kRank8 = kRank1 << 56;
inline constexpr Bitboard kDarkSquares = 0xAA55AA55AA55AA55ULL;  // a1 is dark

constexpr Bitboard bit(int sq) { return Bitboard{1} << sq; }
constexpr int file_of(int sq) { return sq & 7; }
constexpr int rank_of(int sq) { return sq >> 3; }
constexpr int make_square(int file, int rank) { return rank * 8 + file; }

inline int popcount(Bitboard b) { return __builtin_popcountll(b); }
inline int lsb(Bitboard b) { return __builtin_ctzll(b); }
inline int pop_lsb(Bitboard& b) {
  const int s = __builtin_ctzll(b);
  b &= b - 1;
  return s;
}
// Vertical flip (rank r <-> rank 7 - r): the board as seen by black.
inline Bitboard flip_vertical(Bitboard b) { return __builtin_bswap64(b); }

struct Magic {
  Bitboard mask;      // relevant blocker squares (board edges excluded)
  Bitboard magic;
  const Bitboard* attacks;
  int shift;
  std::uint32_t index(Bitboard occ) const { return static_cast<std::uint32_t>(((occ & mask) * magic) >> shift); }
};

struct Tables {
  Bitboard knight[64];
  Bitboard king[64];
  Bitboard pawn[2][64];      // squares attacked by a pawn of that colour on s
  Bitboard between[64][64];  // squares strictly between two aligned squares, else 0
  Bitboard line[64][64];     // the whole line through two aligned squares, else 0
  Magic bishop[64];
  Magic rook[64];
};

// Built once (thread-safe function-local static) on first use.
const Tables& tables();

inline Bitboard bishop_attacks(int sq, Bitboard occ) {
  const Magic& m = tables().bishop[sq];
  return m.attacks[m.index(occ)];
}
inline Bitboard rook_attacks(int sq, Bitboard occ) {
  const Magic& m = tables().rook[sq];
  return m.attacks[m.index(occ)];
}
inline Bitboard queen_attacks(int sq, Bitboard occ) { return bishop_attacks(sq, occ) | rook_attacks(sq, occ); }
inline Bitboard knight_attacks(int sq) { return tables().knight[sq]; }
inline Bitboard king_attacks(int sq) { return tables().king[sq]; }
inline Bitboard pawn_attacks(Color c, int sq) { return tables().pawn[c][sq]; }
inline Bitboard between(int a, int b) { return tables().between[a][b]; }
inline Bitboard line_through(int a, int b) { return tables().line[a][b]; }

}  // namespace meeple::chess
