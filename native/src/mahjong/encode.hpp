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

// `out` holds kPublicPlanes * 34 floats.
void encode_public(const Game& g, int seat, float* out);
// `out` holds kOraclePlanes * 34 floats (the oracle planes only; the public ones separately).
void encode_oracle(const Game& g, int seat, float* out);

}  // namespace meeple::mj
