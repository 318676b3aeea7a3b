// Random and rule-based bots, and bot-only matches. See bots.hpp and docs/mahjong_bots.md.
#include "bots.hpp"

#include <algorithm>
#include <bitset>
#include <stdexcept>

#include "shanten.hpp"

namespace meeple::mj {

Bot bot_from_name(const std::string& name) {
  if (name == "random") return Bot::Random;
  if (name == "rule") return Bot::Rule;
  if (name == "rule-nofold") return Bot::RuleNoFold;
  throw std::invalid_argument("unknown bot '" + name + "'; accepted: random, rule, rule-nofold");
}

const char* bot_name(Bot bot) {
  switch (bot) {
    case Bot::Random:
      return "random";
    case Bot::Rule:
      return "rule";
    case Bot::RuleNoFold:
      return "rule-nofold";
  }
  return "?";
}

namespace {

// Below this ukeire a 1-shanten hand is "poor" and folds against a riichi (tuned on seed 11:
// 8 -> avg rank 2.51, 16 -> 2.43 vs rule-nofold; folding at any shanten >= 1 -> 2.44; with the
// post-riichi genbutsu, 16 -> 2.374).
constexpr int kFoldUkeire = 16;

// What one seat can see: every physical tile it knows the place of. A called discard
// lies both in the discarder's river and in the caller's meld; a set of tile ids counts it once.
struct View {
  Counts hand{};           // own concealed kinds
  std::array<int, kNumKinds> unseen{};  // copies the seat cannot see
  std::array<int, kNumKinds> dora{};    // dora count per kind
  // Genbutsu per seat: kinds it discarded (furiten) and, once it is in riichi, every kind
  // any seat discarded after its riichi declaration (it passed on them: riichi furiten).
  std::array<uint64_t, 4> safe{};
  std::array<bool, 4> riichi{};
  int seat_wind = kEast, round_wind = kEast;
  int tiles = 0;                         // concealed tile count
};

View make_view(const Game& g, int seat) {
  View v;
  std::bitset<kNumTiles> seen;
  const std::vector<int> hand = g.hand(seat);
  for (int t : hand) ++v.hand[kind_of(t)], seen.set(t);
  v.tiles = static_cast<int>(hand.size());
  std::array<int, 4> riichi_turn;  // hand-wide discard number of the declaration tile
  riichi_turn.fill(1 << 30);
  for (int s = 0; s < 4; ++s) {
    const Game::Player& pl = g.player(s);
    for (int t : pl.discards) seen.set(t), v.safe[s] |= 1ull << kind_of(t);
    for (const Meld& m : pl.melds)
      for (int t : m.tiles) seen.set(t);
    v.riichi[s] = pl.riichi;
    if (pl.riichi && pl.riichi_index >= 0) riichi_turn[s] = pl.discard_turn[pl.riichi_index];
  }
  // Discards after a declaration. Only own turns read `safe` (bot_action folds on its own
  // discard), so no discard is still on offer for a ron here. Rivers are scanned newest first.
  for (int r = 0; r < 4; ++r) {
    if (riichi_turn[r] == (1 << 30)) continue;
    for (int s = 0; s < 4; ++s) {
      const Game::Player& pl = g.player(s);
      for (size_t i = pl.discards.size(); i-- > 0 && pl.discard_turn[i] > riichi_turn[r];)
        v.safe[r] |= 1ull << kind_of(pl.discards[i]);
    }
  }
  for (int t : g.dora_indicators()) seen.set(t), ++v.dora[dora_of(kind_of(t))];
  std::array<int, kNumKinds> vis{};
  for (int t = 0; t < kNumTiles; ++t) vis[kind_of(t)] += seen[t];
  for (int k = 0; k < kNumKinds; ++k) v.unseen[k] = 4 - vis[k];
  v.seat_wind = kEast + (seat - g.dealer() + 4) % 4;
  v.round_wind = kEast + std::min(g.kyoku() / 4, 3);
  return v;
}

bool is_yakuhai(const View& v, int k) { return k >= kHaku || k == v.seat_wind || k == v.round_wind; }

// How much the hand wants to keep a tile of kind k (lower = discard first): isolated
// honors, then terminals, then middle tiles; dora and red fives are kept.
int keep_value(const View& v, int k, bool red) {
  int val;
  if (is_honor(k)) {
    val = is_yakuhai(v, k) ? 2 : 0;
  } else {
    const int r = rank_of(k);
    val = (r == 0 || r == 8) ? 1 : (r == 1 || r == 7) ? 3 : 4;
    for (int d = -2; d <= 2; ++d) {  // neighbours in the same suit make it a useful block
      const int j = r + d;
      if (d != 0 && j >= 0 && j < 9) val += v.hand[k + d] > 0;
    }
  }
  if (v.hand[k] >= 2) val += 2;
  return val + 6 * v.dora[k] + (red ? 6 : 0);
}

// Danger of discarding kind k into seat r's riichi: 0 genbutsu ... 7 a live middle tile.
int danger(const View& v, int r, int k) {
  auto gen = [&](int j) { return (v.safe[r] >> j & 1) != 0; };
  if (gen(k)) return 0;
  const int vis = 4 - v.unseen[k];
  if (is_honor(k)) return vis >= 3 ? 1 : vis == 2 ? 3 : 4;
  const int n = rank_of(k);
  const bool terminal = n == 0 || n == 8;
  const bool low_safe = n < 3 || gen(k - 3);  // ryanmen (n+1, n+2)... below: shape (n-2, n-1) waits n-3
  const bool high_safe = n > 5 || gen(k + 3);
  if (low_safe && high_safe) return terminal ? 2 : 3;  // suji (both sides for 4-6)
  // Kabe (no chance): every two-sided shape that waits on k needs a tile whose four copies we see.
  auto dead = [&](int j) { return 4 - v.unseen[j] >= 4; };
  const bool below_dead = n < 2 || dead(k - 1) || dead(k - 2);
  const bool above_dead = n > 6 || dead(k + 1) || dead(k + 2);
  if (below_dead && above_dead) return terminal ? 2 : 3;
  if (low_safe || high_safe) return 5;  // half suji
  return terminal ? 5 : (n == 1 || n == 7) ? 6 : 7;
}

struct Cand {
  int idx;         // into legal
  int kind;
  int sh = 99, uke = -1, danger = 0, value = 0;
};

// Index among `idx` (non-empty) chosen uniformly with rng only when there is a tie.
int pick_tied(const std::vector<int>& idx, SplitMix64& rng) {
  return idx.size() == 1 ? idx[0] : idx[rng.below(static_cast<uint32_t>(idx.size()))];
}

// Best shanten after a call that removes `consumed` and then discards the best tile.
int shanten_after_call(const View& v, const Action& a) {
  Counts c = v.hand;
  for (int t : a.consumed)
    if (t >= 0) --c[kind_of(t)];
  int best = 99;
  for (int k = 0; k < kNumKinds; ++k) {
    if (!c[k] || k == kind_of(a.tile)) continue;  // kuikae: not the called kind
    --c[k];
    best = std::min(best, shanten(c));
    ++c[k];
  }
  return best;
}

Action rule_action(const Game& g, int seat, SplitMix64& rng, bool fold) {
  const std::vector<Action> legal = g.legal_actions(seat);
  if (legal.empty()) throw std::invalid_argument("bot_action: seat " + std::to_string(seat) + " has no legal action");
  for (const Action& a : legal)
    if (a.type == ActionType::Tsumo || a.type == ActionType::Ron) return a;
  for (const Action& a : legal)
    if (a.type == ActionType::Kyuushu) return a;

  const View v = make_view(g, seat);
  bool threat = false;
  for (int s = 0; s < 4; ++s) threat |= s != seat && v.riichi[s];

  bool self_turn = false;
  for (const Action& a : legal) self_turn |= a.type == ActionType::Discard || a.type == ActionType::Riichi;

  if (!self_turn) {  // claims window
    const Action* pass = nullptr;
    for (const Action& a : legal)
      if (a.type == ActionType::Pass) pass = &a;
    Counts c = v.hand;
    const int sh = shanten(c);
    if (fold && threat && sh >= 1) return pass ? *pass : legal[0];  // no calls while not tenpai under riichi
    bool has_yaku = false;  // an open yakuhai set already: more calls keep the hand valid
    for (const Meld& m : g.melds(seat)) has_yaku |= m.type != MeldType::Chi && is_yakuhai(v, kind_of(m.tiles[0]));
    int best_sh = 99;
    std::vector<int> best;
    for (int i = 0; i < static_cast<int>(legal.size()); ++i) {
      const Action& a = legal[i];
      if (a.type != ActionType::Pon && a.type != ActionType::Chi) continue;
      const bool yakuhai_pon = a.type == ActionType::Pon && is_yakuhai(v, kind_of(a.tile));
      const int after = shanten_after_call(v, a);
      const bool take = yakuhai_pon ? after <= sh : (has_yaku && after < sh);
      if (!take) continue;
      if (after < best_sh) best_sh = after, best.clear();
      if (after == best_sh) best.push_back(i);
    }
    if (!best.empty()) return legal[pick_tied(best, rng)];
    return pass ? *pass : legal[0];
  }

  if (v.riichi[seat]) {  // only the drawn tile (or a kan) may go: discard it
    for (const Action& a : legal)
      if (a.type == ActionType::Discard) return a;
  }

  std::vector<Cand> cands;
  cands.reserve(legal.size());
  Counts c = v.hand;
  int min_sh = 99;
  for (int i = 0; i < static_cast<int>(legal.size()); ++i) {
    const Action& a = legal[i];
    if (a.type != ActionType::Discard && a.type != ActionType::Riichi) continue;
    Cand cd{i, kind_of(a.tile)};
    --c[cd.kind];
    cd.sh = shanten(c);
    ++c[cd.kind];
    cd.value = keep_value(v, cd.kind, is_red(a.tile));
    min_sh = std::min(min_sh, cd.sh);
    cands.push_back(cd);
  }
  std::array<int, kNumKinds> uke_of;  // per kind: red/plain fives and riichi/plain share it
  uke_of.fill(-1);
  auto fill_uke = [&](Cand& cd) {
    if (uke_of[cd.kind] < 0) {
      --c[cd.kind];
      uke_of[cd.kind] = ukeire(c, cd.sh, v.unseen);
      ++c[cd.kind];
    }
    cd.uke = uke_of[cd.kind];
  };
  int best_uke = 0;
  for (Cand& cd : cands)
    if (cd.sh == min_sh) fill_uke(cd), best_uke = std::max(best_uke, cd.uke);

  const bool folding = fold && threat && (min_sh >= 2 || (min_sh == 1 && best_uke < kFoldUkeire));
  if (folding) {
    for (Cand& cd : cands) {
      cd.danger = 0;
      for (int r = 0; r < 4; ++r)
        if (r != seat && v.riichi[r]) cd.danger = std::max(cd.danger, danger(v, r, cd.kind));
    }
    // Ukeire only breaks ties among the safest candidates of the lowest shanten (per action
    // type, as `choose` compares within a type); the others need none.
    int min_d = 99;
    for (const Cand& cd : cands) min_d = std::min(min_d, cd.danger);
    int safe_sh[2] = {99, 99};  // [plain discard, riichi]
    auto riichi = [&](const Cand& cd) { return legal[cd.idx].type == ActionType::Riichi ? 1 : 0; };
    for (const Cand& cd : cands)
      if (cd.danger == min_d) safe_sh[riichi(cd)] = std::min(safe_sh[riichi(cd)], cd.sh);
    for (Cand& cd : cands)
      if (cd.danger == min_d && cd.sh == safe_sh[riichi(cd)]) fill_uke(cd);
  }

  // Lexicographic order: (danger when folding), shanten, -ukeire, keep value; then rng.
  auto better = [&](const Cand& x, const Cand& y) -> int {  // <0: x better, 0 tie
    if (folding && x.danger != y.danger) return x.danger - y.danger;
    if (x.sh != y.sh) return x.sh - y.sh;
    if (x.uke != y.uke) return y.uke - x.uke;
    return x.value - y.value;
  };
  auto choose = [&](ActionType want) -> int {  // index into legal, -1 none
    const Cand* best = nullptr;
    std::vector<int> ties;
    for (const Cand& cd : cands) {
      if (legal[cd.idx].type != want) continue;
      if (!folding && cd.sh != min_sh) continue;
      if (folding && cd.uke < 0) continue;  // not among the safest of the lowest shanten
      const int cmp = best ? better(cd, *best) : -1;
      if (cmp < 0) best = &cd, ties.assign(1, cd.idx);
      else if (cmp == 0) ties.push_back(cd.idx);
    }
    return best ? pick_tied(ties, rng) : -1;
  };

  if (!folding && min_sh == 0) {  // tenpai: riichi on the discard that leaves the most waits
    const int r = choose(ActionType::Riichi);
    if (r >= 0) {
      for (const Cand& cd : cands)
        if (cd.idx == r && cd.uke > 0) return legal[r];
    }
  }
  const int d = choose(ActionType::Discard);
  if (d >= 0) return legal[d];
  const int r = choose(ActionType::Riichi);  // (no plain discard offered)
  if (r >= 0) return legal[r];
  for (const Action& a : legal)
    if (a.type == ActionType::Discard) return a;
  return legal[0];
}

}  // namespace

Action bot_action(Bot bot, const Game& g, int seat, SplitMix64& rng) {
  if (seat < 0 || seat > 3) throw std::invalid_argument("bot_action: seat must be 0..3, got " + std::to_string(seat));
  if (bot == Bot::Random) {
    const std::vector<Action> legal = g.legal_actions(seat);
    if (legal.empty())
      throw std::invalid_argument("bot_action: seat " + std::to_string(seat) + " has no legal action");
    return legal[rng.below(static_cast<uint32_t>(legal.size()))];
  }
  return rule_action(g, seat, rng, bot == Bot::Rule);
}

uint64_t seat_stream_seed(uint64_t policy_seed, int seat) {
  SplitMix64 s(policy_seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(seat + 1)));
  return s.next();
}

std::array<int, 4> placements(const std::array<int, 4>& scores) {
  std::array<int, 4> order{0, 1, 2, 3}, place{};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  for (int r = 0; r < 4; ++r) place[order[r]] = r;
  return place;
}

void MatchTally::step(Game& g, int seat, const Action& a) {
  g.step(seat, a);
  SeatStats& st = counts.seats[seat];
  ++st.decisions;
  st.riichi += a.type == ActionType::Riichi;
  // Calls that happened (a claim may lose to a ron): count new open melds.
  for (int s = 0; s < 4; ++s) {
    const auto& ms = g.melds(s);
    if (ms.size() > melds[s] && ms.back().type != MeldType::Ankan) ++counts.seats[s].calls;
    melds[s] = ms.size();
  }
}

BotMatch MatchTally::result(const Game& g) const {
  BotMatch out = counts;
  for (const WinRecord& w : g.wins()) {
    ++out.seats[w.winner].wins;
    if (w.loser < 0) ++out.seats[w.winner].tsumo;
    else ++out.seats[w.loser].deal_ins;
  }
  const std::array<int, 4> place = placements(g.scores());
  for (int s = 0; s < 4; ++s) out.seats[s].rank = place[s] + 1, out.seats[s].score = g.scores()[s];
  out.hands = g.hands_played();
  return out;
}

BotMatch play_bots(Game& g, const std::array<Bot, 4>& bots, uint64_t policy_seed) {
  std::array<SplitMix64, 4> rng{SplitMix64(seat_stream_seed(policy_seed, 0)), SplitMix64(seat_stream_seed(policy_seed, 1)),
                                SplitMix64(seat_stream_seed(policy_seed, 2)), SplitMix64(seat_stream_seed(policy_seed, 3))};
  MatchTally tally;
  while (!g.is_done()) {
    const int seat = g.pending().front();
    tally.step(g, seat, bot_action(bots[seat], g, seat, rng[seat]));
  }
  return tally.result(g);
}

}  // namespace meeple::mj
