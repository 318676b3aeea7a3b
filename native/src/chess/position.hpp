// One chess position: pieces, side to move, castling rights, en passant square,
// move clocks and a Zobrist key. Legal move generation, copy-make moves, FEN.
//
// Conventions
// * Standard chess only (no Chess960): castling is encoded as the king's
//   two-square move (UCI "e1g1"), as in UCI and python-chess.
// * The en passant square is kept only when an en passant capture is legal,
//   so positions that offer the same moves compare (and hash) equal, which is
//   what the repetition rule asks for; FEN output shows it under the same rule
//   (python-chess's default `fen()` does the same).
// * Castling rights are kept only while the king and the rook stand on their
//   original squares (FEN input is cleaned the same way).
// * A Position is a small trivially copyable value: search copies it and plays
//   on the copy (copy-make) instead of undoing moves.
#pragma once

#include <cstdint>
#include <string>

#include "chess/bitboard.hpp"

namespace meeple::chess {

// Castling-right bits.
enum : std::uint8_t { kWhiteOO = 1, kWhiteOOO = 2, kBlackOO = 4, kBlackOOO = 8 };

// A move: from, to and the promotion piece (kNoPieceType if none). Special
// moves (castling, en passant, double push) are recognised from the board.
struct Move {
  std::uint8_t from = 0, to = 0, promo = kNoPieceType;
  bool operator==(const Move& o) const { return from == o.from && to == o.to && promo == o.promo; }
  bool operator!=(const Move& o) const { return !(*this == o); }
};

// Legal moves of one position. 256 > 218, the most legal moves known in a
// reachable position; FEN input is checked for reachable material so that no
// position can overflow it.
struct MoveList {
  static constexpr int kCapacity = 256;
  Move moves[kCapacity];
  int size = 0;
  void push(int from, int to, int promo = kNoPieceType) {
    moves[size++] = Move{static_cast<std::uint8_t>(from), static_cast<std::uint8_t>(to),
                         static_cast<std::uint8_t>(promo)};
  }
  const Move* begin() const { return moves; }
  const Move* end() const { return moves + size; }
};

inline constexpr const char* kStartFen = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

class Position {
 public:
  Position() { set_fen(kStartFen); }
  // Throws std::invalid_argument naming the bad field.
  static Position from_fen(const std::string& fen) {
    Position p;
    p.set_fen(fen);
    return p;
  }
  void set_fen(const std::string& fen);
  std::string fen() const;

  Color side_to_move() const { return side_; }
  Bitboard pieces(Color c, PieceType t) const { return by_type_[t] & by_color_[c]; }
  Bitboard pieces(PieceType t) const { return by_type_[t]; }
  Bitboard pieces(Color c) const { return by_color_[c]; }
  Bitboard occupied() const { return by_color_[0] | by_color_[1]; }
  // Piece on a square: type (kNoPieceType if empty) and colour.
  PieceType type_on(int sq) const { return static_cast<PieceType>(board_[sq] & 7); }
  Color color_on(int sq) const { return static_cast<Color>(board_[sq] >> 3); }
  int king_square(Color c) const { return lsb(pieces(c, kKing)); }
  std::uint8_t castling() const { return castling_; }
  int ep_square() const { return ep_; }  // -1 if none (or no legal en passant capture)
  int halfmove_clock() const { return halfmove_; }
  int fullmove_number() const { return fullmove_; }
  std::uint64_t key() const { return key_; }

  // Pieces of colour `by` attacking `sq` with the given occupancy.
  Bitboard attackers(int sq, Color by, Bitboard occ) const;
  Bitboard checkers() const { return attackers(king_square(side_), ~side_, occupied()); }
  bool in_check() const { return checkers() != 0; }

  void legal_moves(MoveList& out) const;
  bool has_legal_move() const;  // early exit
  // Plays a legal move (unchecked: callers pass moves from legal_moves).
  void play(Move m);
  // True if m resets the half-move clock (pawn move or capture).
  bool is_zeroing(Move m) const {
    return type_on(m.from) == kPawn || type_on(m.to) != kNoPieceType;
  }
  // Dead position by material alone (see docs/chess.md): no pawns, rooks or
  // queens, and either at most one knight and no bishops, or bishops only,
  // all on squares of one colour.
  bool insufficient_material() const;

  // UCI move text ("e2e4", "e7e8q"); parse returns false if malformed.
  static std::string to_uci(Move m);
  static bool parse_uci(const std::string& s, Move& out);

 private:
  struct Blank {};
  explicit Position(Blank) { clear(); }
  void clear();
  void put(int sq, Color c, PieceType t);
  void remove(int sq);
  bool ep_capture_legal(int from, int ep_sq) const;
  bool any_legal_ep(int ep_sq) const;
  std::uint64_t compute_key() const;
  template <bool kStopAtFirst>
  int generate(MoveList* out) const;

  Bitboard by_type_[6];
  Bitboard by_color_[2];
  std::uint8_t board_[64];  // (colour << 3) | type; type 6 = empty
  Color side_ = kWhite;
  std::uint8_t castling_ = 0;
  std::int8_t ep_ = -1;
  std::uint16_t halfmove_ = 0;
  std::uint16_t fullmove_ = 1;
  std::uint64_t key_ = 0;
};

// Leaf nodes of the legal move tree to `depth` (depth 0 = 1).
std::uint64_t perft(const Position& pos, int depth);

}  // namespace meeple::chess
