// Game: history, automatic game end, AlphaZero input planes (see game.hpp).
#include "chess/game.hpp"

#include <algorithm>
#include <cstring>

namespace meeple::chess {

const char* termination_name(Termination t) {
  switch (t) {
    case Termination::kCheckmate: return "checkmate";
    case Termination::kStalemate: return "stalemate";
    case Termination::kInsufficientMaterial: return "insufficient_material";
    case Termination::kFiftyMoves: return "fifty_moves";
    case Termination::kThreefoldRepetition: return "threefold_repetition";
    default: return "";
  }
}

Game::Game(const Position& start) : pos_(start) { record(); }

void Game::record() {
  if (num_keys_ == kMaxKeys) {  // only reachable by playing on after the 50-move draw
    std::memmove(keys_, keys_ + 1, sizeof(std::uint64_t) * (kMaxKeys - 1));
    --num_keys_;
  }
  const std::uint64_t k = pos_.key();
  int reps = 0;
  // Keys carry the side to move, so only every second earlier position can match.
  for (int i = num_keys_ - 2; i >= 0; i -= 2) reps += keys_[i] == k;
  keys_[num_keys_++] = k;

  if (hist_len_ > 0) head_ = (head_ + 1) % kHistory;
  hist_len_ = std::min(hist_len_ + 1, kHistory);
  Snapshot& s = hist_[head_];
  for (int c = 0; c < 2; ++c)
    for (int t = 0; t < 6; ++t) s.pieces[c][t] = pos_.pieces(static_cast<Color>(c), static_cast<PieceType>(t));
  s.key = k;
  s.reps = static_cast<std::uint8_t>(std::min(reps, 255));
}

void Game::play_move(Move m) {
  const bool zeroing = pos_.is_zeroing(m);
  pos_.play(m);
  ++ply_;
  if (zeroing) num_keys_ = 0;  // no earlier position can come back
  record();
}

void Game::play(int action) {
  Move m;
  action_to_move(action, pos_, m);
  play_move(m);
}

int Game::legal_moves(int* actions) const {
  MoveList ml;
  pos_.legal_moves(ml);
  const Color us = pos_.side_to_move();
  for (int i = 0; i < ml.size; ++i) actions[i] = move_to_action(ml.moves[i], us);
  return ml.size;
}

Termination Game::termination() const {
  // python-chess's order: a stalemate with bare kings is reported as insufficient material.
  const bool can_move = pos_.has_legal_move();
  if (!can_move && pos_.in_check()) return Termination::kCheckmate;
  if (pos_.insufficient_material()) return Termination::kInsufficientMaterial;
  if (!can_move) return Termination::kStalemate;
  if (pos_.halfmove_clock() >= 100) return Termination::kFiftyMoves;
  if (repetitions() >= 2) return Termination::kThreefoldRepetition;
  return Termination::kNone;
}

std::uint64_t Game::key() const {
  auto mix = [](std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  };
  std::uint64_t h = mix(static_cast<std::uint64_t>(hist_len_) << 40 ^
                        static_cast<std::uint64_t>(pos_.halfmove_clock()) << 20 ^
                        static_cast<std::uint64_t>(pos_.fullmove_number()));
  for (int t = 0; t < hist_len_; ++t) {
    const Snapshot& s = hist_[(head_ - t + kHistory) % kHistory];
    h = mix(h ^ s.key ^ (static_cast<std::uint64_t>(std::min<int>(s.reps, 2)) << 62));
  }
  return h;
}

void Game::encode(float* out) const {
  std::fill(out, out + kNumPlanes * kPlaneSize, 0.0f);
  const Color us = pos_.side_to_move(), them = ~us;
  const bool flip = us == kBlack;  // black sees the board from its own side
  auto set_bits = [flip](float* plane, Bitboard b) {
    if (flip) b = flip_vertical(b);
    while (b) plane[pop_lsb(b)] = 1.0f;
  };
  auto fill = [](float* plane, float v) { std::fill(plane, plane + kPlaneSize, v); };
  for (int t = 0; t < hist_len_; ++t) {
    const Snapshot& s = hist_[(head_ - t + kHistory) % kHistory];
    float* base = out + t * kPlanesPerPosition * kPlaneSize;
    for (int p = 0; p < 6; ++p) {
      set_bits(base + p * kPlaneSize, s.pieces[us][p]);
      set_bits(base + (6 + p) * kPlaneSize, s.pieces[them][p]);
    }
    if (s.reps >= 1) fill(base + 12 * kPlaneSize, 1.0f);
    if (s.reps >= 2) fill(base + 13 * kPlaneSize, 1.0f);
  }
  float* meta = out + kHistory * kPlanesPerPosition * kPlaneSize;
  const std::uint8_t cr = pos_.castling();
  const bool white = us == kWhite;
  fill(meta + 0 * kPlaneSize, white ? 0.0f : 1.0f);
  fill(meta + 1 * kPlaneSize, static_cast<float>(pos_.fullmove_number()) / 100.0f);
  fill(meta + 2 * kPlaneSize, (cr & (white ? kWhiteOO : kBlackOO)) ? 1.0f : 0.0f);
  fill(meta + 3 * kPlaneSize, (cr & (white ? kWhiteOOO : kBlackOOO)) ? 1.0f : 0.0f);
  fill(meta + 4 * kPlaneSize, (cr & (white ? kBlackOO : kWhiteOO)) ? 1.0f : 0.0f);
  fill(meta + 5 * kPlaneSize, (cr & (white ? kBlackOOO : kWhiteOOO)) ? 1.0f : 0.0f);
  fill(meta + 6 * kPlaneSize, static_cast<float>(pos_.halfmove_clock()) / 100.0f);
}

}  // namespace meeple::chess
