// A chess game: the current position plus the history that the rules and the
// network input need (repetitions, the last 8 positions), with the game-ending
// rules applied automatically. This is the state the generic MCTS and the
// self-play engine search over (chess/traits.hpp).
//
// Game end (checked in this order; docs/chess.md):
//   checkmate (loss for the side to move), insufficient material
//   (Position::insufficient_material), stalemate, 50-move rule (half-move clock >= 100
//   and the side to move has a legal move), threefold repetition (the current
//   position occurred twice before: same pieces, side to move, castling rights
//   and legal en passant square).
// The two draws that a player could only *claim* over the board (50 moves,
// threefold) end the game at once here, as in AlphaZero-style self-play: it
// keeps games finite and short. No 75-move or fivefold rule is needed then.
//
// The state is a fixed-size value (~2.2 KB, no heap): search copies it.
#pragma once

#include <cstdint>
#include <string>

#include "chess/actions.hpp"
#include "chess/position.hpp"

namespace meeple::chess {

inline constexpr int kHistory = 8;            // positions in the network input
inline constexpr int kPlanesPerPosition = 14; // 12 piece planes + 2 repetition planes
inline constexpr int kNumPlanes = kHistory * kPlanesPerPosition + 7;  // 119
inline constexpr int kPlaneSize = 64;

enum class Termination : std::int8_t {
  kNone = 0,
  kCheckmate,
  kStalemate,
  kInsufficientMaterial,
  kFiftyMoves,
  kThreefoldRepetition,
};
const char* termination_name(Termination t);  // "checkmate", ..., "" for kNone

class Game {
 public:
  Game() : Game(Position{}) {}
  explicit Game(const Position& start);
  static Game from_fen(const std::string& fen) { return Game(Position::from_fen(fen)); }

  const Position& position() const { return pos_; }
  int to_play() const { return pos_.side_to_move(); }
  int ply() const { return ply_; }  // moves played since the start position

  // ---- the interface of mcts::Tree / SelfPlayEngine (actions = policy indices)
  int legal_moves(int* actions) const;  // chess-legal moves, also in drawn positions
  void play(int action);                // unchecked: a legal action
  bool is_terminal() const { return termination() != Termination::kNone; }
  int terminal_value() const { return termination() == Termination::kCheckmate ? -1 : 0; }
  // Key of everything the network sees (the last 8 positions, repetition
  // counts, clocks): the evaluation cache may trust it.
  std::uint64_t key() const;
  void encode(float* out) const;  // kNumPlanes x 8 x 8 floats, docs/chess.md

  // ---- rules
  void play_move(Move m);  // unchecked: a legal move
  Termination termination() const;
  // Earlier occurrences of the current position in this game (since the last
  // pawn move or capture): 0, 1, or 2 (threefold).
  int repetitions() const { return hist_[head_].reps; }
  std::uint64_t position_key() const { return pos_.key(); }

 private:
  struct Snapshot {
    Bitboard pieces[2][6];
    std::uint64_t key;
    std::uint8_t reps;
  };
  void record();

  Position pos_;
  Snapshot hist_[kHistory];  // ring buffer; hist_[head_] = current position
  int head_ = 0;
  int hist_len_ = 0;
  // Keys of the positions since the last pawn move or capture (repetitions can
  // only happen among them); the automatic 50-move draw bounds them at 101.
  static constexpr int kMaxKeys = 128;
  std::uint64_t keys_[kMaxKeys];
  int num_keys_ = 0;
  int ply_ = 0;
};

}  // namespace meeple::chess
