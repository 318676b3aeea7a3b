#include "wall.hpp"

namespace meeple::mj {

namespace {
// One SplitMix64 output of `a` mixed with `b`: a keyed hash for the seed hierarchy.
uint64_t mix(uint64_t a, uint64_t b) {
  SplitMix64 g(a ^ (b * 0xD1B54A32D192ED03ull));
  g.next();
  return g.next();
}
}  // namespace

uint64_t game_key(uint64_t session_seed, uint64_t game) { return mix(mix(session_seed, 0x6d6a6f6e67ull), game); }

uint64_t hand_key(uint64_t session_seed, uint64_t game, uint32_t kyoku, uint32_t honba) {
  return mix(mix(game_key(session_seed, game), kyoku), honba);
}

std::array<uint8_t, 136> make_wall(uint64_t key) {
  std::array<uint8_t, 136> w;
  for (int i = 0; i < 136; ++i) w[i] = static_cast<uint8_t>(i);
  SplitMix64 g(key);
  for (uint32_t i = 135; i > 0; --i) {
    const uint32_t j = g.below(i + 1);
    std::swap(w[i], w[j]);
  }
  return w;
}

}  // namespace meeple::mj
