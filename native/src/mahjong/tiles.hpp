// Riichi mahjong tiles: 34 kinds and 136 physical tiles.
//
// Kind k in [0, 34): 0-8 = 1m-9m, 9-17 = 1p-9p, 18-26 = 1s-9s, 27-30 = E S W N winds,
// 31-33 = P F C dragons (haku, hatsu, chun). Physical tile id in [0, 136): kind * 4 + copy.
// With red fives on, copy 0 of each five (ids 16, 52, 88) is the red one, the same
// convention as the `mahjong` Python package so hands convert without a lookup.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace meeple::mj {

constexpr int kNumKinds = 34;
constexpr int kNumTiles = 136;
constexpr int kEast = 27;
constexpr int kHaku = 31;
constexpr int kHatsu = 32;
constexpr int kChun = 33;

using Counts = std::array<uint8_t, kNumKinds>;

constexpr int kind_of(int tile) { return tile >> 2; }
constexpr bool is_honor(int kind) { return kind >= 27; }
constexpr int suit_of(int kind) { return kind / 9; }  // 0 m, 1 p, 2 s, 3 honors
constexpr int rank_of(int kind) { return kind % 9; }  // 0-based rank inside a suit
constexpr bool is_terminal(int kind) { return kind < 27 && (kind % 9 == 0 || kind % 9 == 8); }
constexpr bool is_yaochu(int kind) { return is_honor(kind) || is_terminal(kind); }
constexpr bool is_red(int tile) { return tile == 16 || tile == 52 || tile == 88; }

// The dora indicated by indicator kind `k` (9 -> 1 inside a suit, N -> E, C -> P).
constexpr int dora_of(int k) {
  if (k < 27) return (k / 9) * 9 + (k % 9 + 1) % 9;
  if (k < 31) return 27 + (k - 27 + 1) % 4;
  return 31 + (k - 31 + 1) % 3;
}

// MJAI tile notation: "1m".."9m", "5mr" (red), "E" "S" "W" "N" "P" "F" "C", "?" unknown.
std::string kind_to_mjai(int kind, bool red = false);
std::string tile_to_mjai(int tile, bool red_fives);
// Returns the kind; sets *red for "5mr"/"5pr"/"5sr". Throws std::invalid_argument.
int mjai_to_kind(const std::string& s, bool* red = nullptr);

}  // namespace meeple::mj
