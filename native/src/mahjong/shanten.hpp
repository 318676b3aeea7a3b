// Table-based shanten with the four-copies limit.
//
// The replacement number of a concealed hand H (n tiles, n % 3 != 0) is the fewest
// tiles that must be swapped in to reach a winning hand W of 3*(n/3)+2 tiles that uses
// at most four copies of any kind: min over W of sum_k max(0, W_k - H_k). Shanten is
// the replacement number minus one (tenpai = 0, complete = -1). This is the quantity
// the `xiangting` package computes (it returns the replacement number), and it differs
// from the classic "mentsu/taatsu" count on hands that would need a fifth copy.
//
// Regular hands decompose per suit: for each suit (9 ranks) and the honors (7 kinds) a
// precomputed table gives, for every count vector h in {0..4}^n, the distance to the
// nearest suit-shape with k melds (k = 0..4) and with or without the pair. The tables
// are built once (lazily, thread-safe) by two sweeps over the 5^9 vectors; a hand then
// costs four lookups and a tiny min-plus combination.
#pragma once

#include "tiles.hpp"

namespace meeple::mj {

// Each returns the shanten number (replacement number - 1) of a concealed hand of
// n tiles; n must be in {1,2,4,5,7,8,10,11,13,14} and every count <= 4
// (std::invalid_argument otherwise). Seven pairs and thirteen orphans need n >= 13
// (no melds); for smaller hands they return a large value (99).
int shanten_regular(const Counts& h);
int shanten_chiitoitsu(const Counts& h);
int shanten_kokushi(const Counts& h);
int shanten(const Counts& h);  // min of the three

// Ukeire of a hand `c` of 3n+1 tiles with shanten `sh`: the copies in `unseen` (per kind, what a
// seat cannot see) of every kind whose draw lowers the shanten. With `per_kind`, also writes
// unseen / 4 at each such kind (other entries untouched). `c` is restored before returning.
// The rule bot's discard tie-break and the lookahead planes both count it.
int ukeire(Counts& c, int sh, const std::array<int, kNumKinds>& unseen, float* per_kind = nullptr);

// Builds the tables now (otherwise on first use).
void init_shanten_tables();

}  // namespace meeple::mj
