// Policy index <-> move (see actions.hpp for the layout).
#include "chess/actions.hpp"

#include <algorithm>
#include <cstdlib>

namespace meeple::chess {
namespace {

// (file step, rank step) per queen direction and per knight jump, mover's view.
constexpr int kQueenDirs[8][2] = {{0, 1}, {1, 1}, {1, 0}, {1, -1}, {0, -1}, {-1, -1}, {-1, 0}, {-1, 1}};
constexpr int kKnightJumps[8][2] = {{1, 2}, {2, 1}, {2, -1}, {1, -2}, {-1, -2}, {-2, -1}, {-2, 1}, {-1, 2}};

int sign(int x) { return (x > 0) - (x < 0); }

}  // namespace

int move_to_action(Move m, Color mover) {
  const int orient = mover == kWhite ? 0 : 56;
  const int from = m.from ^ orient, to = m.to ^ orient;
  const int df = file_of(to) - file_of(from), dr = rank_of(to) - rank_of(from);
  int type;
  if (m.promo == kKnight || m.promo == kBishop || m.promo == kRook) {
    if (dr != 1 || df < -1 || df > 1) return -1;
    type = 64 + 3 * (m.promo - kKnight) + (df + 1);
  } else if (std::abs(df) + std::abs(dr) == 3 && df != 0 && dr != 0) {
    type = 56;
    while (kKnightJumps[type - 56][0] != df || kKnightJumps[type - 56][1] != dr) ++type;
  } else {
    if ((df == 0 && dr == 0) || (df != 0 && dr != 0 && std::abs(df) != std::abs(dr))) return -1;
    int dir = 0;
    while (kQueenDirs[dir][0] != sign(df) || kQueenDirs[dir][1] != sign(dr)) ++dir;
    const int dist = std::max(std::abs(df), std::abs(dr));
    type = dir * 7 + dist - 1;
  }
  return type * 64 + from;
}

bool action_to_move(int action, const Position& pos, Move& out) {
  if (action < 0 || action >= kNumActions) return false;
  const int type = action / 64, from = action % 64;
  int df, dr, promo = kNoPieceType;
  if (type < 56) {
    const int dist = type % 7 + 1;
    df = kQueenDirs[type / 7][0] * dist;
    dr = kQueenDirs[type / 7][1] * dist;
  } else if (type < 64) {
    df = kKnightJumps[type - 56][0];
    dr = kKnightJumps[type - 56][1];
  } else {
    df = (type - 64) % 3 - 1;
    dr = 1;
    promo = kKnight + (type - 64) / 3;
  }
  const int tf = file_of(from) + df, tr = rank_of(from) + dr;
  if (tf < 0 || tf > 7 || tr < 0 || tr > 7) return false;
  const int orient = pos.side_to_move() == kWhite ? 0 : 56;
  out.from = static_cast<std::uint8_t>(from ^ orient);
  out.to = static_cast<std::uint8_t>(make_square(tf, tr) ^ orient);
  if (promo == kNoPieceType && tr == 7 && pos.type_on(out.from) == kPawn) promo = kQueen;
  out.promo = static_cast<std::uint8_t>(promo);
  return true;
}

}  // namespace meeple::chess
