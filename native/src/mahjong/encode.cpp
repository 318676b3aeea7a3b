// Observation encoders; docs/mahjong_encoding.md is the plane-by-plane reference and the
// index constants below follow it. Everything is computed from the Game read-only, into
// fixed-size stack arrays, so the encoders are thread-safe across Games and allocate nothing.
#include "encode.hpp"

#include <algorithm>
#include <cstring>

#include "shanten.hpp"

namespace meeple::mj {

namespace {

// Public plane indices.
constexpr int kHand = 0;        // 0-3: concealed count >= 1..4
constexpr int kRedHand = 4;     // red five held in the concealed hand
constexpr int kDrawn = 5;       // the tile just drawn (own turn)
constexpr int kKuikae = 6;      // kinds that may not be discarded right after a call
constexpr int kShanten = 7;     // own shanten, broadcast
constexpr int kSeatBase = 8;    // 4 relative seats x kSeatPlanes
constexpr int kSeatPlanes = 14;
enum SeatPlane {
  kPond, kPondCount, kPondFirst, kPondRecent, kTsumogiri, kTedashi, kCalledAway, kAfterRiichi,
  kRiichiTile, kMeldCount, kTriplet, kRiichiFlag, kScore, kRank
};
constexpr int kGenbutsu = 64;   // 64-66: opponents 1..3
constexpr int kSuji = 67;       // 67-69
constexpr int kDoraInd = 70, kDoraValue = 71, kRedUnseen = 72, kVisible = 73, kNoChance = 74;
constexpr int kOneChance = 75, kRoundWind = 76, kSeatWind = 77, kOffered = 78, kHonba = 79;
constexpr int kSticks = 80, kTilesLeft = 81, kKyoku = 82, kFirstGoAround = 83;
static_assert(kFirstGoAround + 1 == kPublicPlanes, "public plane layout");
static_assert(kSeatBase + 4 * kSeatPlanes == kGenbutsu, "public plane layout");

// Oracle plane indices.
constexpr int kOppPlanes = 9;   // 0-26: 3 opponents x 9
enum OppPlane { kOppHand, kOppRed = 4, kOppShanten, kOppWaits, kOppFuriten, kOppUkeire };
constexpr int kNextDraws = 27;  // 27-96: the next 70 live draws, one-hot
constexpr int kMaxLive = 70;
constexpr int kRedLive = 97, kRinshanPos = 98, kDoraPos = 102, kUraPos = 107, kLiveCount = 112;
constexpr int kDeadCount = 113, kUraValue = 114, kRedDead = 115;
constexpr int kSeatDraws = 116;  // 116-187: 4 relative seats x 18 next own draws, one-hot
constexpr int kSeatDrawSlots = 18;
constexpr int kHorizon = 188;    // 188-203: 4 relative seats x horizons {3, 6, 12, all}
constexpr int kDanger = 204;
static_assert(kDanger + 1 == kOraclePlanes, "oracle plane layout");
static_assert(kSeatDraws + 4 * kSeatDrawSlots == kHorizon, "oracle plane layout");

constexpr int kDeadDora = 126, kDeadUra = 131, kDeadRinshan = 122;

inline float* plane(float* out, int p) { return out + p * kPlaneWidth; }
inline void fill(float* out, int p, float v) {
  float* row = plane(out, p);
  for (int k = 0; k < kPlaneWidth; ++k) row[k] = v;
}

Counts counts_of(const std::vector<int>& tiles) {
  Counts c{};
  for (int t : tiles) ++c[kind_of(t)];
  return c;
}

// Shanten of a concealed hand scaled to [0, 1]: (min(s, 6) + 1) / 7 (0 = complete).
float shanten_feature(int s) { return static_cast<float>(std::min(s, 6) + 1) / 7.0f; }

Counts own_all_counts(const Game::Player& pl) {
  Counts c = counts_of(pl.hand);
  for (const Meld& m : pl.melds)
    for (int t : m.tiles) ++c[kind_of(t)];
  return c;
}

}  // namespace

void encode_public(const Game& g, int seat, float* out) {
  std::memset(out, 0, sizeof(float) * kPublicPlanes * kPlaneWidth);
  const bool red_on = g.rules().scoring.red_fives;
  const Game::Player& me = g.player(seat);

  // Own concealed hand.
  const Counts hand = counts_of(me.hand);
  for (int k = 0; k < kNumKinds; ++k)
    for (int j = 0; j < hand[k]; ++j) plane(out, kHand + j)[k] = 1.0f;
  if (red_on)
    for (int t : me.hand)
      if (is_red(t)) plane(out, kRedHand)[kind_of(t)] = 1.0f;
  if (g.actor() == seat && g.drawn_tile() >= 0) plane(out, kDrawn)[kind_of(g.drawn_tile())] = 1.0f;
  if (g.phase() == Phase::SelfTurn && g.actor() == seat)
    for (int k = 0; k < kNumKinds; ++k)
      if (me.kuikae >> k & 1) plane(out, kKuikae)[k] = 1.0f;
  fill(out, kShanten, me.hand.empty() ? 1.0f : shanten_feature(shanten(hand)));

  // Visible tiles from this seat's view: own hand, every meld, every pond tile not called
  // away (a called tile is in a meld), the dora indicators.
  Counts visible = hand;
  bool red_seen[3] = {false, false, false};
  for (int t : me.hand)
    if (is_red(t)) red_seen[suit_of(kind_of(t))] = true;

  // Rank by score (ties: lower absolute seat first, the engine's end-of-game rule).
  const auto& scores = g.scores();
  const bool claims_on_discard = g.phase() == Phase::Claims && g.claim_kind() == 0;
  const int last_turn = claims_on_discard ? g.turns() - 1 : -1;  // the discard still on offer

  uint64_t genbutsu[4] = {0, 0, 0, 0};
  for (int r = 0; r < 4; ++r) {
    const int s = (seat + r) % 4;
    const Game::Player& pl = g.player(s);
    float* base = out + (kSeatBase + r * kSeatPlanes) * kPlaneWidth;
    auto P = [&](int j) { return base + j * kPlaneWidth; };
    const int n = static_cast<int>(pl.discards.size());
    for (int i = 0; i < n; ++i) {
      const int t = pl.discards[i], k = kind_of(t);
      P(kPond)[k] = 1.0f;
      P(kPondCount)[k] += 0.25f;
      if (P(kPondFirst)[k] == 0.0f) P(kPondFirst)[k] = std::min(1.0f, static_cast<float>(i + 1) / 24.0f);
      const int age = n - 1 - i;
      if (age < 4) P(kPondRecent)[k] = std::max(P(kPondRecent)[k], 1.0f - 0.25f * static_cast<float>(age));
      if (pl.discard_tsumogiri[i]) P(kTsumogiri)[k] = 1.0f;
      else P(kTedashi)[k] = 1.0f;
      if (pl.discard_called[i]) P(kCalledAway)[k] = 1.0f;
      else ++visible[k];
      if (pl.riichi_index >= 0 && i >= pl.riichi_index) P(kAfterRiichi)[k] = 1.0f;
      if (red_on && is_red(t) && !pl.discard_called[i]) red_seen[suit_of(k)] = true;
      genbutsu[s] |= 1ull << k;
    }
    if (pl.riichi_index >= 0) P(kRiichiTile)[kind_of(pl.discards[pl.riichi_index])] = 1.0f;
    for (const Meld& m : pl.melds) {
      for (int t : m.tiles) {
        P(kMeldCount)[kind_of(t)] += 0.25f;
        ++visible[kind_of(t)];
        if (red_on && is_red(t)) red_seen[suit_of(kind_of(t))] = true;
      }
      if (m.type != MeldType::Chi) P(kTriplet)[kind_of(m.tiles[0])] = 1.0f;
    }
    int rank = 0;
    for (int o = 0; o < 4; ++o) rank += scores[o] > scores[s] || (scores[o] == scores[s] && o < s);
    for (int k = 0; k < kPlaneWidth; ++k) {
      P(kRiichiFlag)[k] = pl.riichi ? 1.0f : 0.0f;
      P(kScore)[k] = static_cast<float>(scores[s]) / 100000.0f;
      P(kRank)[k] = static_cast<float>(rank) / 3.0f;
    }
  }

  // Genbutsu: a seat's own pond, plus every discard after its riichi declaration, plus every
  // discard since its own last discard (temporary furiten) -- except a discard still on offer.
  for (int s = 0; s < 4; ++s) {
    const Game::Player& pl = g.player(s);
    const int riichi_turn = pl.riichi_index >= 0 ? pl.discard_turn[pl.riichi_index] : 1 << 30;
    const int own_last = pl.discards.empty() ? -1 : pl.discard_turn.back();
    const int from = std::min(riichi_turn, own_last + 1);
    if (own_last < 0 && riichi_turn == (1 << 30)) continue;
    for (int o = 0; o < 4; ++o) {
      const Game::Player& po = g.player(o);
      for (size_t i = po.discards.size(); i-- > 0;) {
        const int turn = po.discard_turn[i];
        if (turn < from) break;
        if (turn != last_turn) genbutsu[s] |= 1ull << kind_of(po.discards[i]);
      }
    }
  }
  for (int r = 1; r < 4; ++r) {
    const uint64_t gb = genbutsu[(seat + r) % 4];
    float* gp = plane(out, kGenbutsu + r - 1);
    float* sp = plane(out, kSuji + r - 1);
    for (int k = 0; k < kNumKinds; ++k) gp[k] = (gb >> k & 1) ? 1.0f : 0.0f;
    for (int k = 0; k < 27; ++k) {
      const int rk = rank_of(k);
      const bool lo = rk >= 3 && (gb >> (k - 3) & 1), hi = rk <= 5 && (gb >> (k + 3) & 1);
      if (rk <= 2) sp[k] = hi ? 1.0f : 0.0f;
      else if (rk >= 6) sp[k] = lo ? 1.0f : 0.0f;
      else sp[k] = 0.5f * (lo + hi);
    }
  }

  // Dora.
  float* di = plane(out, kDoraInd);
  float* dv = plane(out, kDoraValue);
  for (int i = 0; i < g.dora_shown(); ++i) {
    const int t = g.wall_tiles()[kDeadDora + i], k = kind_of(t);
    di[k] += 1.0f;
    dv[dora_of(k)] += 1.0f;
    ++visible[k];
    if (red_on && is_red(t)) red_seen[suit_of(k)] = true;
  }
  if (red_on)
    for (int s = 0; s < 3; ++s) plane(out, kRedUnseen)[9 * s + 4] = red_seen[s] ? 0.0f : 1.0f;
  float* vis = plane(out, kVisible);
  for (int k = 0; k < kNumKinds; ++k) vis[k] = 0.25f * static_cast<float>(visible[k]);
  // Kabe: a ryanmen wait on rank r needs (r+1, r+2) or (r-2, r-1) in an opponent's hand;
  // a side is impossible when its neighbour is all visible (no-chance) or nearly (one-chance).
  for (int need = 4, p = kNoChance; p <= kOneChance; ++p, --need) {
    float* row = plane(out, p);
    for (int k = 0; k < 27; ++k) {
      const int rk = rank_of(k);
      const bool up_blocked = rk + 2 > 8 || visible[k + 1] >= need;
      const bool down_blocked = rk - 2 < 0 || visible[k - 1] >= need;
      row[k] = up_blocked && down_blocked ? 1.0f : 0.0f;
    }
  }
  const int round_wind = (g.kyoku() / 4) % 4;
  plane(out, kRoundWind)[kEast + round_wind] = 1.0f;
  plane(out, kSeatWind)[kEast + (seat - g.dealer() + 4) % 4] = 1.0f;
  if (g.claim_tile() >= 0) plane(out, kOffered)[kind_of(g.claim_tile())] = 1.0f;
  fill(out, kHonba, static_cast<float>(g.honba()) / 10.0f);
  fill(out, kSticks, static_cast<float>(g.riichi_sticks()) / 4.0f);
  fill(out, kTilesLeft, static_cast<float>(g.tiles_left()) / 70.0f);
  fill(out, kKyoku, static_cast<float>(g.kyoku()) / 8.0f);
  fill(out, kFirstGoAround, g.first_go_around() && !g.is_done() ? 1.0f : 0.0f);
}

void encode_oracle(const Game& g, int seat, float* out) {
  std::memset(out, 0, sizeof(float) * kOraclePlanes * kPlaneWidth);
  const bool red_on = g.rules().scoring.red_fives;
  const auto& wall = g.wall_tiles();

  uint64_t opp_waits[3] = {0, 0, 0};
  for (int r = 1; r < 4; ++r) {
    const Game::Player& pl = g.player((seat + r) % 4);
    float* base = out + (r - 1) * kOppPlanes * kPlaneWidth;
    auto P = [&](int j) { return base + j * kPlaneWidth; };
    const Counts c = counts_of(pl.hand);
    const int n = static_cast<int>(pl.hand.size());
    for (int k = 0; k < kNumKinds; ++k)
      for (int j = 0; j < c[k]; ++j) P(kOppHand + j)[k] = 1.0f;
    if (red_on)
      for (int t : pl.hand)
        if (is_red(t)) P(kOppRed)[kind_of(t)] = 1.0f;
    const int sh = n ? shanten(c) : 8;
    const Counts all = own_all_counts(pl);
    // One shanten per drawable kind gives both the improving kinds and, when tenpai, the
    // winning ones (never a fifth copy of a kind the seat holds all four of: engine rule).
    uint64_t w = 0;
    if (n % 3 == 1) {
      Counts x = c;
      for (int k = 0; k < kNumKinds; ++k) {
        if (all[k] >= 4) continue;
        ++x[k];
        const int s2 = shanten(x);
        --x[k];
        if (s2 < sh) P(kOppUkeire)[k] = 1.0f;
        if (s2 == -1) w |= 1ull << k, P(kOppWaits)[k] = 1.0f;
      }
    }
    opp_waits[r - 1] = w;
    bool furiten = pl.temp_furiten || pl.riichi_furiten;
    for (int t : pl.discards) furiten |= (w >> kind_of(t) & 1) != 0;
    for (int k = 0; k < kPlaneWidth; ++k) {
      P(kOppShanten)[k] = shanten_feature(sh);
      P(kOppFuriten)[k] = furiten ? 1.0f : 0.0f;
    }
  }

  // The live wall in draw order, and by the seat that would draw each tile if nobody calls.
  const int pos0 = g.draw_pos(), end = g.live_wall_end();
  const int last_actor = g.phase() == Phase::Claims ? g.claim_from() : g.actor();
  const int first_rel = (last_actor + 1 - seat + 8) % 4;  // relative seat of the next draw
  static constexpr int kHorizons[4] = {3, 6, 12, kSeatDrawSlots};
  for (int i = 0; pos0 + i < end && i < kMaxLive; ++i) {
    const int t = wall[pos0 + i], k = kind_of(t);
    plane(out, kNextDraws + i)[k] = 1.0f;
    if (red_on && is_red(t)) plane(out, kRedLive)[k] = static_cast<float>(kMaxLive - i) / kMaxLive;
    plane(out, kLiveCount)[k] += 0.25f;
    const int rel = (first_rel + i) % 4, slot = i / 4;
    plane(out, kSeatDraws + rel * kSeatDrawSlots + slot)[k] = 1.0f;
    for (int h = 0; h < 4; ++h)
      if (slot < kHorizons[h]) plane(out, kHorizon + rel * 4 + h)[k] += 0.25f;
  }
  // Dead wall: the unseen part (tiles cut off the live end by kans, undrawn rinshan tiles,
  // unrevealed dora indicators, ura indicators).
  for (int i = 0; i < 4; ++i)
    if (i >= g.kans_total()) plane(out, kRinshanPos + i)[kind_of(wall[kDeadRinshan + i])] = 1.0f;
  for (int i = 0; i < 5; ++i) {
    plane(out, kDoraPos + i)[kind_of(wall[kDeadDora + i])] = 1.0f;
    plane(out, kUraPos + i)[kind_of(wall[kDeadUra + i])] = 1.0f;
  }
  for (int p = end; p < 136; ++p) {
    const bool drawn_rinshan = p >= kDeadRinshan && p < kDeadRinshan + g.kans_total();
    const bool shown_dora = p >= kDeadDora && p < kDeadDora + g.dora_shown();
    if (drawn_rinshan || shown_dora) continue;
    const int k = kind_of(wall[p]);
    plane(out, kDeadCount)[k] += 0.25f;
    if (red_on && is_red(wall[p])) plane(out, kRedDead)[k] = 1.0f;
  }
  for (int i = 0; i < g.dora_shown(); ++i) plane(out, kUraValue)[dora_of(kind_of(wall[kDeadUra + i]))] += 1.0f;
  float* danger = plane(out, kDanger);
  for (int k = 0; k < kNumKinds; ++k)
    for (uint64_t w : opp_waits) danger[k] += (w >> k & 1) ? 1.0f / 3.0f : 0.0f;
}

void encode_lookahead(const float* pub, float* out) {
  std::fill(out, out + kLookaheadPlanes * kPlaneWidth, 0.0f);
  Counts c{};
  std::array<int, kNumKinds> unseen{};
  int n = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    for (int p = 0; p < 4; ++p) c[k] += pub[(kHand + p) * kPlaneWidth + k] > 0.5f;
    n += c[k];
    const int seen = static_cast<int>(pub[kVisible * kPlaneWidth + k] * 4.0f + 0.5f);
    unseen[k] = std::clamp(4 - seen, 0, 4);
  }
  if (n == 0 || n % 3 == 0 || n > 14) return;
  if (n % 3 == 1) {
    ukeire(c, shanten(c), unseen, out + 4 * kPlaneWidth);
    return;
  }
  std::array<int, kNumKinds> sh, uke;
  int best_sh = 99;
  for (int k = 0; k < kNumKinds; ++k) {
    if (!c[k]) continue;
    --c[k];
    sh[k] = shanten(c);
    uke[k] = ukeire(c, sh[k], unseen);
    ++c[k];
    best_sh = std::min(best_sh, sh[k]);
  }
  int best_uke = 0;
  for (int k = 0; k < kNumKinds; ++k)
    if (c[k] && sh[k] == best_sh) best_uke = std::max(best_uke, uke[k]);
  for (int k = 0; k < kNumKinds; ++k) {
    if (!c[k]) continue;
    out[k] = (std::min(sh[k], 6) + 1) / 7.0f;
    const bool best = sh[k] == best_sh;
    out[kPlaneWidth + k] = best;
    out[2 * kPlaneWidth + k] = uke[k] / 40.0f;
    if (best && best_uke > 0) out[3 * kPlaneWidth + k] = static_cast<float>(uke[k]) / best_uke;
  }
}

}  // namespace meeple::mj
