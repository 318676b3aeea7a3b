// Observation encoders of the mahjong env: what one seat sees, as planes over the 34 kinds.
//
// Public (student) observation: kPublicPlanes x 34 float32, row-major [plane][kind].
// Oracle observation: kOraclePlanes x 34 more planes with hidden information (the other
// seats' hands, the wall order in coarse form) for the teacher in distillation.
// docs/mahjong_encoding.md documents every plane. Encoders write into caller memory,
// overwrite every value, and allocate nothing.
#pragma once

#include "game.hpp"

namespace meeple::mj {

constexpr int kPlaneWidth = 34;
constexpr int kPublicPlanes = 84;
constexpr int kOraclePlanes = 205;
constexpr int kLookaheadPlanes = 5;

// `out` holds kPublicPlanes * 34 floats.
void encode_public(const Game& g, int seat, float* out);
// `out` holds kOraclePlanes * 34 floats (the oracle planes only; the public ones separately).
void encode_oracle(const Game& g, int seat, float* out);

// Lookahead planes: what each discard does to the hand, derived from one public observation
// alone (planes 0-3, the concealed counts, and 73, the visible copies), so a network can compute
// them from what it is given. `pub` holds kPublicPlanes * 34 floats, `out` kLookaheadPlanes * 34:
// 0 shanten after discarding the kind, (min(s, 6) + 1) / 7 (held kinds; hands of 3n+2 tiles)
// 1 discarding the kind keeps the best shanten reachable by a discard (0/1)
// 2 live advancing tiles after discarding it: unseen copies of the kinds that would lower that
//   shanten if drawn (the rule bot's ukeire), / 40
// 3 plane 2 over its largest value among the discards that keep the best shanten (those only)
// 4 hands of 3n+1 tiles (claims windows): unseen copies / 4 of each kind that lowers the
//   shanten if drawn
// A count vector no hand can have (a 3n-tile hand, all zeros) gives zero planes.
void encode_lookahead(const float* pub, float* out);

}  // namespace meeple::mj
