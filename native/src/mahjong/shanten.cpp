#include "shanten.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

namespace meeple::mj {

namespace {

constexpr int kPow5[10] = {1, 5, 25, 125, 625, 3125, 15625, 78125, 390625, 1953125};
constexpr int kTargets = 10;  // index k * 2 + pair, k = melds in 0..4, pair in {0, 1}
constexpr uint8_t kInf = 99;

// Distance tables over {0..4}^n count vectors, kTargets bytes per vector.
struct Table {
  int n = 0;
  std::vector<uint8_t> dist;
};

// Marks every shape of `melds` triplets/sequences (sequences only when `runs`) plus an
// optional pair, with no count above 4, in `target` (bit k*2+pair).
void mark_shapes(int n, bool runs, int start, int melds, std::array<int, 9>& c,
                 std::vector<uint16_t>& target) {
  // Record this shape (no pair and each possible pair).
  int idx = 0;
  for (int i = 0; i < n; ++i) idx += c[i] * kPow5[i];
  target[idx] |= static_cast<uint16_t>(1u << (melds * 2));
  for (int p = 0; p < n; ++p) {
    if (c[p] + 2 <= 4) target[idx + 2 * kPow5[p]] |= static_cast<uint16_t>(1u << (melds * 2 + 1));
  }
  if (melds == 4) return;
  // Melds in non-decreasing order (start = 2 * kind + is_run) to enumerate each multiset once.
  for (int m = start; m < 2 * n; ++m) {
    int i = m / 2;
    bool run = m % 2;
    if (!run) {
      if (c[i] + 3 > 4) continue;
      c[i] += 3;
      mark_shapes(n, runs, m, melds + 1, c, target);
      c[i] -= 3;
    } else {
      if (!runs || i + 2 >= n || c[i] >= 4 || c[i + 1] >= 4 || c[i + 2] >= 4) continue;
      ++c[i], ++c[i + 1], ++c[i + 2];
      mark_shapes(n, runs, m, melds + 1, c, target);
      --c[i], --c[i + 1], --c[i + 2];
    }
  }
}

Table build_table(int n, bool runs) {
  const int size = kPow5[n];
  // contains[v]: bit j set when some target shape j is <= v componentwise.
  std::vector<uint16_t> contains(size, 0);
  std::array<int, 9> c{};
  mark_shapes(n, runs, 0, 0, c, contains);
  std::vector<int> digit(n);
  // Ascending sweep: v contains a shape iff it is one or v - e_t contains one.
  for (int v = 0; v < size; ++v) {
    int x = v;
    uint16_t acc = contains[v];
    for (int t = 0; t < n; ++t, x /= 5) {
      if (x % 5) acc |= contains[v - kPow5[t]];
    }
    contains[v] = acc;
  }
  // Descending sweep: d(v) = 0 if v contains the shape, else 1 + min_t d(v + e_t)
  // (adding a tile never hurts, and some added tile always helps).
  Table tab;
  tab.n = n;
  tab.dist.assign(static_cast<size_t>(size) * kTargets, kInf);
  for (int v = size - 1; v >= 0; --v) {
    uint8_t* d = &tab.dist[static_cast<size_t>(v) * kTargets];
    uint8_t best[kTargets];
    std::fill(best, best + kTargets, kInf);
    int x = v;
    for (int t = 0; t < n; ++t, x /= 5) {
      if (x % 5 == 4) continue;
      const uint8_t* up = &tab.dist[static_cast<size_t>(v + kPow5[t]) * kTargets];
      for (int j = 0; j < kTargets; ++j) best[j] = std::min(best[j], up[j]);
    }
    for (int j = 0; j < kTargets; ++j) {
      d[j] = (contains[v] >> j & 1) ? 0 : static_cast<uint8_t>(std::min<int>(kInf, best[j] + 1));
    }
  }
  return tab;
}

const Table* g_suit = nullptr;
const Table* g_honor = nullptr;
std::once_flag g_once;

void build_all() {
  static const Table suit = build_table(9, true);
  static const Table honor = build_table(7, false);
  g_suit = &suit;
  g_honor = &honor;
}

int check_hand(const Counts& h) {
  int n = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    if (h[k] > 4) {
      throw std::invalid_argument("shanten: tile " + kind_to_mjai(k) + " appears " +
                                  std::to_string(h[k]) + " times; at most 4 copies exist");
    }
    n += h[k];
  }
  if (n > 14 || n % 3 == 0) {
    throw std::invalid_argument("shanten: a concealed hand has 1, 2, 4, 5, 7, 8, 10, 11, 13 or 14 tiles, got " +
                                std::to_string(n));
  }
  return n;
}

}  // namespace

void init_shanten_tables() { std::call_once(g_once, build_all); }

int shanten_regular(const Counts& h) {
  const int n = check_hand(h);
  init_shanten_tables();
  const int melds = n / 3;
  // best[k][p]: fewest replacements for k melds and p pairs over the parts seen so far.
  int best[5][2];
  for (auto& b : best) b[0] = b[1] = kInf;
  best[0][0] = 0;
  for (int part = 0; part < 4; ++part) {
    const Table& tab = part < 3 ? *g_suit : *g_honor;
    int idx = 0;
    for (int i = 0; i < tab.n; ++i) idx += h[part * 9 + i] * kPow5[i];
    const uint8_t* d = &tab.dist[static_cast<size_t>(idx) * kTargets];
    int next[5][2];
    for (auto& b : next) b[0] = b[1] = kInf;
    for (int k = 0; k <= melds; ++k) {
      for (int p = 0; p < 2; ++p) {
        if (best[k][p] >= kInf) continue;
        for (int dk = 0; k + dk <= melds; ++dk) {
          for (int dp = 0; p + dp < 2; ++dp) {
            next[k + dk][p + dp] = std::min(next[k + dk][p + dp], best[k][p] + d[dk * 2 + dp]);
          }
        }
      }
    }
    std::copy(&next[0][0], &next[0][0] + 10, &best[0][0]);
  }
  return best[melds][1] - 1;
}

int shanten_chiitoitsu(const Counts& h) {
  const int n = check_hand(h);
  if (n < 13) return kInf;
  int pairs = 0, kinds = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    pairs += h[k] >= 2;
    kinds += h[k] >= 1;
  }
  // Keep the 7 kinds with most of min(2, count): pairs first, then singles.
  const int p = std::min(pairs, 7);
  const int singles = std::min(kinds - pairs, 7 - p);
  return 14 - (2 * p + singles) - 1;
}

int shanten_kokushi(const Counts& h) {
  const int n = check_hand(h);
  if (n < 13) return kInf;
  int kinds = 0;
  bool pair = false;
  for (int k = 0; k < kNumKinds; ++k) {
    if (!is_yaochu(k) || h[k] == 0) continue;
    ++kinds;
    pair |= h[k] >= 2;
  }
  return 14 - kinds - (pair ? 1 : 0) - 1;
}

int shanten(const Counts& h) {
  return std::min({shanten_regular(h), shanten_chiitoitsu(h), shanten_kokushi(h)});
}

int ukeire(Counts& c, int sh, const std::array<int, kNumKinds>& unseen, float* per_kind) {
  int n = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    if (unseen[k] <= 0 || c[k] >= 4) continue;
    ++c[k];
    if (shanten(c) < sh) {
      n += unseen[k];
      if (per_kind) per_kind[k] = unseen[k] / 4.0f;
    }
    --c[k];
  }
  return n;
}

}  // namespace meeple::mj
