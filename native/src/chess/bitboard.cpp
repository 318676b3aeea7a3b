// Attack tables and the start-up magic search (see bitboard.hpp).
#include "chess/bitboard.hpp"

#include <vector>

namespace meeple::chess {
namespace {

// Attack set of a slider on `sq` moving along `dirs` (file, rank steps), stopping
// at the first blocker (included). Slow; used only to build the tables.
Bitboard slide(int sq, Bitboard occ, const int (*dirs)[2]) {
  Bitboard out = 0;
  for (int d = 0; d < 4; ++d) {
    int f = file_of(sq), r = rank_of(sq);
    for (;;) {
      f += dirs[d][0];
      r += dirs[d][1];
      if (f < 0 || f > 7 || r < 0 || r > 7) break;
      const int s = make_square(f, r);
      out |= bit(s);
      if (occ & bit(s)) break;
    }
  }
  return out;
}

constexpr int kBishopDirs[4][2] = {{1, 1}, {1, -1}, {-1, 1}, {-1, -1}};
constexpr int kRookDirs[4][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}};

// Blocker squares that matter: the rays without their last square (a piece on
// the edge blocks nothing beyond it).
Bitboard relevant_mask(int sq, const int (*dirs)[2]) {
  Bitboard out = 0;
  for (int d = 0; d < 4; ++d) {
    auto on_board = [](int f, int r) { return f >= 0 && f <= 7 && r >= 0 && r <= 7; };
    int f = file_of(sq) + dirs[d][0], r = rank_of(sq) + dirs[d][1];
    while (on_board(f, r) && on_board(f + dirs[d][0], r + dirs[d][1])) {
      out |= bit(make_square(f, r));
      f += dirs[d][0];
      r += dirs[d][1];
    }
  }
  return out;
}

struct Prng {  // xorshift64*, fixed seed: the same magics on every run
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  std::uint64_t sparse() { return next() & next() & next(); }
};

// Finds a magic for every square and fills `storage` with the attack sets.
void build_magics(Magic* magics, std::vector<Bitboard>& storage, const int (*dirs)[2], std::uint64_t seed) {
  Prng rng{seed};
  std::vector<Bitboard> occs, atts;
  std::vector<int> epoch;
  std::size_t offset = 0;
  std::vector<std::size_t> offsets(64);
  // Sizes first so that `storage` never reallocates under the pointers.
  std::size_t total = 0;
  for (int sq = 0; sq < 64; ++sq) total += std::size_t{1} << popcount(relevant_mask(sq, dirs));
  storage.assign(total, 0);
  for (int sq = 0; sq < 64; ++sq) {
    Magic& m = magics[sq];
    m.mask = relevant_mask(sq, dirs);
    const int bits = popcount(m.mask);
    const std::size_t size = std::size_t{1} << bits;
    m.shift = 64 - bits;
    occs.clear();
    atts.clear();
    // Every subset of the mask (Carry-Rippler enumeration).
    Bitboard sub = 0;
    do {
      occs.push_back(sub);
      atts.push_back(slide(sq, sub, dirs));
      sub = (sub - m.mask) & m.mask;
    } while (sub);
    Bitboard* table = storage.data() + offset;
    epoch.assign(size, 0);
    for (int attempt = 1;; ++attempt) {
      const Bitboard magic = rng.sparse();
      if (popcount((m.mask * magic) >> 56) < 6) continue;  // too few high bits: rarely works
      bool ok = true;
      for (std::size_t i = 0; i < occs.size() && ok; ++i) {
        const auto idx = static_cast<std::size_t>(((occs[i] & m.mask) * magic) >> m.shift);
        if (epoch[idx] != attempt) {
          epoch[idx] = attempt;
          table[idx] = atts[i];
        } else if (table[idx] != atts[i]) {
          ok = false;
        }
      }
      if (ok) {
        m.magic = magic;
        break;
      }
    }
    m.attacks = table;
    offset += size;
  }
}

struct Built {
  Tables t;
  std::vector<Bitboard> bishop_storage, rook_storage;
  Built() {
    for (int sq = 0; sq < 64; ++sq) {
      const int f = file_of(sq), r = rank_of(sq);
      auto add = [&](Bitboard& b, int df, int dr) {
        const int nf = f + df, nr = r + dr;
        if (nf >= 0 && nf <= 7 && nr >= 0 && nr <= 7) b |= bit(make_square(nf, nr));
      };
      t.knight[sq] = t.king[sq] = t.pawn[0][sq] = t.pawn[1][sq] = 0;
      constexpr int kKnightSteps[8][2] = {{1, 2}, {2, 1}, {2, -1}, {1, -2}, {-1, -2}, {-2, -1}, {-2, 1}, {-1, 2}};
      for (const auto& st : kKnightSteps) add(t.knight[sq], st[0], st[1]);
      for (int df = -1; df <= 1; ++df)
        for (int dr = -1; dr <= 1; ++dr)
          if (df || dr) add(t.king[sq], df, dr);
      add(t.pawn[kWhite][sq], -1, 1);
      add(t.pawn[kWhite][sq], 1, 1);
      add(t.pawn[kBlack][sq], -1, -1);
      add(t.pawn[kBlack][sq], 1, -1);
    }
    build_magics(t.bishop, bishop_storage, kBishopDirs, 0x9E3779B97F4A7C15ULL);
    build_magics(t.rook, rook_storage, kRookDirs, 0xD1B54A32D192ED03ULL);
    for (int a = 0; a < 64; ++a) {
      for (int b = 0; b < 64; ++b) {
        t.between[a][b] = t.line[a][b] = 0;
        if (a == b) continue;
        for (const auto* dirs : {kBishopDirs, kRookDirs}) {
          const bool rook = dirs == kRookDirs;
          const Bitboard from_a = rook ? slide(a, 0, kRookDirs) : slide(a, 0, kBishopDirs);
          if (!(from_a & bit(b))) continue;
          const Bitboard from_b = rook ? slide(b, 0, kRookDirs) : slide(b, 0, kBishopDirs);
          t.line[a][b] = (from_a & from_b) | bit(a) | bit(b);
          const Bitboard ray_a = rook ? slide(a, bit(b), kRookDirs) : slide(a, bit(b), kBishopDirs);
          const Bitboard ray_b = rook ? slide(b, bit(a), kRookDirs) : slide(b, bit(a), kBishopDirs);
          t.between[a][b] = ray_a & ray_b;
        }
      }
    }
  }
};

}  // namespace

const Tables& tables() {
  static const Built built;
  return built.t;
}

}  // namespace meeple::chess
