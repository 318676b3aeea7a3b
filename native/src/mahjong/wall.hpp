// Deterministic walls: a hand's 136-tile wall is a pure function of
// (session seed, game index, kyoku, honba).
//
// Both the key derivation and the shuffle use SplitMix64 (Steele, Lea, Flood 2014),
// written out here, and a Fisher-Yates shuffle with rejection-sampled bounded draws, so
// walls are identical across runs, thread counts, compilers and machines (no std::
// distributions, whose output is implementation-defined). Seats are not part of the
// key: rotating the players over the seats of the same game index replays the same
// walls (duplicate evaluation).
//
// Layout of the returned wall: live tiles are drawn from index 0 upward; the last 14
// are the dead wall d[0..13] = wall[122..135]: rinshan draws d[0..3] in order, dora
// indicators d[4..8] (the first is shown at the deal, one more per kan), ura indicators
// d[9..13] (ura i lies under dora indicator i).
#pragma once

#include <array>
#include <cstdint>

namespace meeple::mj {

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) without modulo bias (rejects the top partial block).
  uint32_t below(uint32_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return static_cast<uint32_t>(x % n);
  }
};

constexpr int kDeadWall = 14;
constexpr int kFirstDead = 136 - kDeadWall;

// Independent stream key of game `game` within a session (the set_stream of the spec).
uint64_t game_key(uint64_t session_seed, uint64_t game);
// Key of one hand: (game key, kyoku = 0 for East 1 ... 7 for South 4 ..., honba).
uint64_t hand_key(uint64_t session_seed, uint64_t game, uint32_t kyoku, uint32_t honba);
std::array<uint8_t, 136> make_wall(uint64_t key);

}  // namespace meeple::mj
