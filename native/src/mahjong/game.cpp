#include "game.hpp"

#include <algorithm>
#include <stdexcept>

#include "shanten.hpp"
#include "wall.hpp"

namespace meeple::mj {

namespace {

constexpr const char* kWinds[4] = {"E", "S", "W", "N"};
constexpr int kDeadRinshan = 122;  // wall[122 + i]: i-th rinshan tile
constexpr int kDeadDora = 126;     // wall[126 + i]: i-th dora indicator
constexpr int kDeadUra = 131;      // wall[131 + i]: i-th ura indicator

int popcount64(uint64_t x) { return __builtin_popcountll(x); }

bool complete(const Counts& c) { return shanten(c) == -1; }

void remove_tile(std::vector<int>& v, int t) {
  auto it = std::find(v.begin(), v.end(), t);
  if (it == v.end()) throw std::logic_error("mahjong engine: tile not in hand");
  v.erase(it);
}

std::string jstr(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

const char* action_type_name(ActionType t) {
  static constexpr const char* kNames[] = {"discard", "riichi", "tsumo", "ron", "chi", "pon",
                                           "daiminkan", "ankan", "kakan", "kyuushu", "pass"};
  return kNames[static_cast<int>(t)];
}

std::string Action::to_string() const {
  std::string s = action_type_name(type);
  if (tile >= 0) s += " " + tile_to_mjai(tile, true);
  bool first = true;
  for (int c : consumed) {
    if (c < 0) continue;
    s += first ? " [" : ",";
    s += tile_to_mjai(c, true);
    first = false;
  }
  if (!first) s += "]";
  return s;
}

Game::Game(GameRules rules) : rules_(rules) { init_shanten_tables(); }

std::string Game::scores_json() const {
  return "[" + std::to_string(scores_[0]) + "," + std::to_string(scores_[1]) + "," + std::to_string(scores_[2]) +
         "," + std::to_string(scores_[3]) + "]";
}

std::string Game::tile_json(int t) const { return jstr(tile_to_mjai(t, rules_.scoring.red_fives)); }

std::string Game::tiles_json(std::vector<int> ts) const {
  std::sort(ts.begin(), ts.end());
  std::string s = "[";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? "," : "") + tile_json(ts[i]);
  return s + "]";
}

void Game::reset_with_walls(std::vector<std::array<uint8_t, 136>> walls) {
  for (const auto& w : walls) {
    std::array<bool, 136> seen{};
    for (uint8_t t : w) {
      if (t >= 136 || seen[t]) throw std::invalid_argument("reset_with_walls: each wall must be a permutation of 0..135");
      seen[t] = true;
    }
  }
  forced_walls_ = std::move(walls);
  forced_next_ = 0;
  reset_impl(0, 0);
}

void Game::reset(uint64_t session_seed, uint64_t game_index) {
  forced_walls_.clear();
  forced_next_ = 0;
  reset_impl(session_seed, game_index);
}

void Game::reset_impl(uint64_t session_seed, uint64_t game_index) {
  seed_ = session_seed;
  game_ = game_index;
  scores_.fill(rules_.start_points);
  kyoku_ = honba_ = sticks_ = hands_played_ = 0;
  events_.clear();
  wins_.clear();
  if (record_) emit(R"({"type":"start_game","names":["p0","p1","p2","p3"],"seed":)" + std::to_string(seed_) +
       ",\"game\":" + std::to_string(game_) + "}");
  start_hand();
}

std::vector<int> Game::hand(int seat) const {
  std::vector<int> h = p_[seat].hand;
  std::sort(h.begin(), h.end());
  return h;
}

std::vector<int> Game::dora_indicators() const {
  std::vector<int> d;
  for (int i = 0; i < dora_shown_; ++i) d.push_back(wall_[kDeadDora + i]);
  return d;
}

void Game::start_hand() {
  if (forced_next_ < forced_walls_.size()) wall_ = forced_walls_[forced_next_++];
  else wall_ = make_wall(hand_key(seed_, game_, static_cast<uint32_t>(kyoku_), static_cast<uint32_t>(honba_)));
  for (auto& pl : p_) pl = Player{};
  waits_cache_.fill(-1);
  // Deal 13 consecutive tiles to each seat, dealer first (our fixed convention).
  for (int i = 0; i < 4; ++i) {
    const int seat = (dealer() + i) % 4;
    for (int j = 0; j < 13; ++j) p_[seat].hand.push_back(wall_[13 * i + j]);
  }
  draw_pos_ = 52;
  kans_total_ = 0;
  dora_shown_ = 1;
  pending_dora_ = 0;
  kan_players_mask_ = 0;
  any_call_ = false;
  turns_ = 0;
  riichi_declared_ = 0;
  riichi_pending_seat_ = -1;
  after_call_ = false;
  rinshan_turn_ = false;
  if (record_) {
    std::string ev = R"({"type":"start_kyoku","bakaze":")" + std::string(kWinds[(kyoku_ / 4) % 4]) +
                     "\",\"dora_marker\":" + tile_json(wall_[kDeadDora]) + ",\"kyoku\":" + std::to_string(kyoku_ % 4 + 1) +
                     ",\"honba\":" + std::to_string(honba_) + ",\"kyotaku\":" + std::to_string(sticks_) +
                     ",\"oya\":" + std::to_string(dealer()) + ",\"scores\":" + scores_json() + ",\"tehais\":[";
    for (int s = 0; s < 4; ++s) ev += (s ? "," : "") + tiles_json(p_[s].hand);
    emit(ev + "]}");
  }
  actor_ = dealer();
  draw(false);
}

void Game::redeal_wall(uint64_t seed) {
  if (phase_ == Phase::GameOver) return;
  std::vector<int> unseen;
  unseen.reserve(136 - draw_pos_);
  for (int i = draw_pos_; i < kDeadRinshan; ++i) unseen.push_back(i);
  for (int i = kDeadRinshan + kans_total_; i < kDeadDora; ++i) unseen.push_back(i);
  for (int i = kDeadDora + dora_shown_; i < kDeadUra; ++i) unseen.push_back(i);
  for (int i = kDeadUra; i < 136; ++i) unseen.push_back(i);
  SplitMix64 rng(seed);
  for (size_t k = unseen.size(); k > 1; --k)  // Fisher-Yates over the unseen positions
    std::swap(wall_[unseen[k - 1]], wall_[unseen[rng.below(static_cast<uint32_t>(k))]]);
}

void Game::draw(bool rinshan) {
  Player& pl = p_[actor_];
  const int t = rinshan ? wall_[kDeadRinshan + kans_total_ - 1] : wall_[draw_pos_++];
  pl.hand.push_back(t);
  touch(actor_);
  drawn_ = t;
  rinshan_turn_ = rinshan;
  after_call_ = false;
  phase_ = Phase::SelfTurn;
  if (record_) emit(R"({"type":"tsumo","actor":)" + std::to_string(actor_) + ",\"pai\":" + tile_json(t) + "}");
}

Counts Game::concealed_counts(int seat) const {
  Counts c{};
  for (int t : p_[seat].hand) ++c[kind_of(t)];
  return c;
}

Counts Game::visible_own_counts(int seat) const {
  Counts c = concealed_counts(seat);
  for (const Meld& m : p_[seat].melds)
    for (int t : m.tiles) ++c[kind_of(t)];
  return c;
}

uint64_t Game::waits(int seat) const {
  if (waits_cache_[seat] < 0) waits_cache_[seat] = static_cast<int64_t>(waits_of(p_[seat].hand, p_[seat].melds));
  return static_cast<uint64_t>(waits_cache_[seat]);
}

uint64_t Game::waits_of(const std::vector<int>& hand, const std::vector<Meld>& melds) {
  // Kinds that complete a 13 - 3m tile hand, excluding a "fifth copy" of a kind the
  // seat itself holds all four of (such a hand is not tenpai).
  Counts c{};
  for (int t : hand) ++c[kind_of(t)];
  if (shanten(c) != 0) return 0;
  Counts own = c;
  for (const Meld& m : melds)
    for (int t : m.tiles) ++own[kind_of(t)];
  uint64_t w = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    if (own[k] >= 4) continue;
    ++c[k];
    if (complete(c)) w |= 1ull << k;
    --c[k];
  }
  return w;
}

bool Game::furiten(int seat) const {
  const Player& pl = p_[seat];
  if (pl.temp_furiten || pl.riichi_furiten) return true;
  const uint64_t w = waits(seat);
  for (int t : pl.discards)
    if (w >> kind_of(t) & 1) return true;
  return false;
}

WinInput Game::win_input(int seat, int win_tile, bool tsumo, bool chankan) const {
  const Player& pl = p_[seat];
  WinInput in;
  in.closed = pl.hand;
  if (!tsumo) in.closed.push_back(win_tile);
  in.melds = pl.melds;
  in.win_tile = win_tile;
  in.tsumo = tsumo;
  in.riichi = pl.riichi;
  in.double_riichi = pl.double_riichi;
  in.ippatsu = pl.riichi && pl.ippatsu;
  in.rinshan = tsumo && rinshan_turn_;
  in.chankan = chankan;
  const bool last = tiles_left() == 0;
  in.haitei = tsumo && last && !rinshan_turn_;
  in.houtei = !tsumo && last && !chankan;
  const bool first_draw = tsumo && !any_call_ && pl.discards.empty() && !rinshan_turn_;
  in.tenhou = first_draw && seat == dealer();
  in.chiihou = first_draw && seat != dealer();
  in.seat_wind = (seat - dealer() + 4) % 4;
  in.round_wind = (kyoku_ / 4) % 4;
  in.dora_indicators = dora_indicators();
  for (int i = 0; i < dora_shown_; ++i) in.ura_indicators.push_back(wall_[kDeadUra + i]);
  in.honba = honba_;
  in.riichi_sticks = sticks_;
  return in;
}

ScoreResult Game::try_score(int seat, int win_tile, bool tsumo, bool chankan) const {
  return score_hand(win_input(seat, win_tile, tsumo, chankan), rules_.scoring);
}

bool Game::discard_ok_after_call(const Player& pl, const std::vector<int>& removed, uint64_t forbid) const {
  std::vector<int> rest = pl.hand;
  for (int t : removed) remove_tile(rest, t);
  return std::any_of(rest.begin(), rest.end(), [&](int t) { return !(forbid >> kind_of(t) & 1); });
}

std::vector<Action> Game::self_actions(int seat) const {
  const Player& pl = p_[seat];
  std::vector<Action> out;
  const bool drew = drawn_ >= 0 && !after_call_;
  // Distinct discards by (kind, red); the drawn tile represents its class (tsumogiri).
  std::vector<int> reps;
  for (int t : pl.hand) {
    if (pl.kuikae >> kind_of(t) & 1) continue;
    const bool red = rules_.scoring.red_fives && is_red(t);
    auto same = std::find_if(reps.begin(), reps.end(), [&](int r) {
      return kind_of(r) == kind_of(t) && (rules_.scoring.red_fives && is_red(r)) == red;
    });
    if (same == reps.end()) reps.push_back(t);
    else if (t == drawn_) *same = t;
  }
  if (drew) {
    Counts c = concealed_counts(seat);
    const int sh14 = shanten(c);
    if (sh14 == -1 && try_score(seat, drawn_, true, false).ok) out.push_back({ActionType::Tsumo, drawn_, {-1, -1, -1}});
    const bool closed = std::none_of(pl.melds.begin(), pl.melds.end(), [](const Meld& m) { return m.opened(); });
    // A 14-tile hand can be tenpai after a discard only if its own shanten is <= 0.
    if (!pl.riichi && closed && scores_[seat] >= 1000 && tiles_left() >= 4 && sh14 <= 0) {
      for (int t : reps) {
        --c[kind_of(t)];
        if (shanten(c) == 0) {
          // Tenpai with a real wait (not only on a fifth copy).
          std::vector<int> rest = pl.hand;
          remove_tile(rest, t);
          if (waits_of(rest, pl.melds) != 0) out.push_back({ActionType::Riichi, t, {-1, -1, -1}});
        }
        ++c[kind_of(t)];
      }
    }
    if (kans_total_ < 4 && tiles_left() > 0) {
      for (int k = 0; k < kNumKinds; ++k) {
        if (c[k] != 4) continue;
        if (pl.riichi) {
          // Only with the drawn tile, and only if the waits stay the same.
          if (kind_of(drawn_) != k) continue;
          std::vector<int> before = pl.hand;
          remove_tile(before, drawn_);
          const uint64_t w0 = waits_of(before, pl.melds);
          std::vector<int> after = pl.hand;
          std::vector<Meld> after_melds = pl.melds;
          Meld m{MeldType::Ankan, {}};
          for (int i = 0; i < 4; ++i) remove_tile(after, k * 4 + i), m.tiles.push_back(k * 4 + i);
          after_melds.push_back(m);
          const uint64_t w1 = waits_of(after, after_melds);
          if (w0 != w1 || w0 == 0) continue;
        }
        out.push_back({ActionType::Ankan, k * 4, {k * 4 + 1, k * 4 + 2, k * 4 + 3}});
      }
      if (!pl.riichi) {
        for (const Meld& m : pl.melds) {
          if (m.type != MeldType::Pon) continue;
          for (int t : pl.hand)
            if (kind_of(t) == kind_of(m.tiles[0])) out.push_back({ActionType::Kakan, t, {-1, -1, -1}});
        }
      }
    }
    if (rules_.kyuushu_kyuuhai && !any_call_ && pl.discards.empty() && !rinshan_turn_) {
      int kinds = 0;
      for (int k = 0; k < kNumKinds; ++k) kinds += is_yaochu(k) && c[k] > 0;
      if (kinds >= 9) out.push_back({ActionType::Kyuushu, -1, {-1, -1, -1}});
    }
  }
  if (pl.riichi && drew) {
    out.push_back({ActionType::Discard, drawn_, {-1, -1, -1}});
  } else {
    for (int t : reps) out.push_back({ActionType::Discard, t, {-1, -1, -1}});
  }
  return out;
}

std::vector<Action> Game::claim_actions(int seat) const {
  std::vector<Action> out;
  if (seat == claim_from_) return out;
  const Player& pl = p_[seat];
  const int t = claim_tile_;
  const int k = kind_of(t);
  const uint64_t w = waits(seat);
  if ((w >> k & 1) && !furiten(seat)) {
    bool allowed = true;
    if (claim_kind_ == ClaimKind::Ankan) allowed = shanten_kokushi(concealed_counts(seat)) == 0;
    if (allowed && try_score(seat, t, false, claim_kind_ != ClaimKind::Discard).ok)
      out.push_back({ActionType::Ron, t, {-1, -1, -1}});
  }
  if (claim_kind_ == ClaimKind::Discard && tiles_left() > 0 && !pl.riichi) {
    const bool red_on = rules_.scoring.red_fives;
    auto copies = [&](int kind) {
      // Own copies of `kind`, the red one first, then plain ones.
      std::vector<int> v;
      for (int x : pl.hand)
        if (kind_of(x) == kind) v.push_back(x);
      std::sort(v.begin(), v.end(), [&](int a, int b) { return (red_on && is_red(a)) > (red_on && is_red(b)); });
      return v;
    };
    const std::vector<int> same = copies(k);
    if (same.size() >= 2) {
      // Pon variants differ only by how many red fives they use.
      std::vector<std::array<int, 2>> pairs;
      for (size_t i = 0; i < same.size(); ++i)
        for (size_t j = i + 1; j < same.size(); ++j) {
          const int reds = (red_on && is_red(same[i])) + (red_on && is_red(same[j]));
          bool dup = false;
          for (auto& p : pairs) dup |= ((red_on && is_red(p[0])) + (red_on && is_red(p[1]))) == reds;
          if (!dup) pairs.push_back({same[i], same[j]});
        }
      for (auto& p : pairs)
        if (discard_ok_after_call(pl, {p[0], p[1]}, 1ull << k)) out.push_back({ActionType::Pon, t, {p[0], p[1], -1}});
    }
    if (same.size() == 3 && kans_total_ < 4) out.push_back({ActionType::Daiminkan, t, {same[0], same[1], same[2]}});
    if (seat == (claim_from_ + 1) % 4 && !is_honor(k)) {
      const int r = rank_of(k);
      for (int lo = r - 2; lo <= r; ++lo) {
        if (lo < 0 || lo + 2 > 8) continue;
        const int base = suit_of(k) * 9 + lo;
        int need[2], n = 0;
        for (int x = base; x < base + 3; ++x)
          if (x != k) need[n++] = x;
        const std::vector<int> a = copies(need[0]), b = copies(need[1]);
        if (a.empty() || b.empty()) continue;
        // Swap-calling ban: the called kind, and the kind at the far end of a side call.
        uint64_t forbid = 1ull << k;
        if (lo == r && r + 3 <= 8) forbid |= 1ull << (k + 3);
        if (lo == r - 2 && r - 3 >= 0) forbid |= 1ull << (k - 3);
        std::vector<std::array<int, 2>> seen;
        for (int x : a)
          for (int y : b) {
            const bool rx = red_on && is_red(x), ry = red_on && is_red(y);
            bool dup = false;
            for (auto& s : seen) dup |= (red_on && is_red(s[0])) == rx && (red_on && is_red(s[1])) == ry;
            if (dup) continue;
            seen.push_back({x, y});
            if (discard_ok_after_call(pl, {x, y}, forbid)) out.push_back({ActionType::Chi, t, {x, y, -1}});
          }
      }
    }
  }
  if (!out.empty()) out.push_back({ActionType::Pass, -1, {-1, -1, -1}});
  return out;
}

std::vector<int> Game::pending() const {
  if (phase_ == Phase::SelfTurn) return {actor_};
  std::vector<int> s;
  if (phase_ == Phase::Claims)
    for (int i = 0; i < 4; ++i)
      if (!claim_done_[i]) s.push_back(i);
  return s;
}

std::vector<Action> Game::legal_actions(int seat) const {
  if (seat < 0 || seat > 3) throw std::invalid_argument("seat must be in 0..3, got " + std::to_string(seat));
  if (phase_ == Phase::SelfTurn) return seat == actor_ ? self_actions(seat) : std::vector<Action>{};
  if (phase_ == Phase::Claims) return claim_done_[seat] ? std::vector<Action>{} : claim_options_[seat];
  return {};
}

void Game::step(int seat, const Action& a) {
  if (phase_ == Phase::GameOver) throw std::invalid_argument("step: the game is over");
  const std::vector<Action> legal = legal_actions(seat);
  if (std::find(legal.begin(), legal.end(), a) == legal.end()) {
    std::string msg = "illegal action for seat " + std::to_string(seat) + ": " + a.to_string() + "; legal: [";
    for (size_t i = 0; i < legal.size(); ++i) msg += (i ? ", " : "") + legal[i].to_string();
    msg += "]";
    if (legal.empty()) {
      msg += " (seat " + std::to_string(seat) + " is not to act; pending:";
      for (int s : pending()) msg += " " + std::to_string(s);
      msg += ")";
    }
    throw std::invalid_argument(msg);
  }
  if (phase_ == Phase::Claims) {
    claim_choice_[seat] = a;
    claim_done_[seat] = true;
    if (std::all_of(claim_done_.begin(), claim_done_.end(), [](bool d) { return d; })) resolve_claims();
    return;
  }
  Player& pl = p_[seat];
  switch (a.type) {
    case ActionType::Discard:
    case ActionType::Riichi:
      do_discard(seat, a.tile, a.type == ActionType::Riichi);
      return;
    case ActionType::Tsumo:
      end_hand_win({seat}, -1, drawn_, false);
      return;
    case ActionType::Kyuushu: {
      end_hand_draw("kyushukyuhai", false);
      return;
    }
    case ActionType::Ankan: {
      const int k = kind_of(a.tile);
      Meld m{MeldType::Ankan, {}};
      for (int i = 0; i < 4; ++i) remove_tile(pl.hand, k * 4 + i), m.tiles.push_back(k * 4 + i);
      pl.melds.push_back(m);
      touch(seat);
      ++pl.kans, ++kans_total_, kan_players_mask_ |= 1 << seat;
      any_call_ = true;
      for (auto& q : p_) q.ippatsu = false;
      if (record_) emit(R"({"type":"ankan","actor":)" + std::to_string(seat) + ",\"consumed\":" + tiles_json(m.tiles) + "}");
      while (pending_dora_ > 0) reveal_dora();
      reveal_dora_now();
      claim_tile_ = a.tile, claim_from_ = seat, claim_kind_ = ClaimKind::Ankan;
      kan_actor_after_claims_ = seat;
      open_claims();
      return;
    }
    case ActionType::Kakan: {
      const int k = kind_of(a.tile);
      auto it = std::find_if(pl.melds.begin(), pl.melds.end(),
                             [&](const Meld& m) { return m.type == MeldType::Pon && kind_of(m.tiles[0]) == k; });
      std::vector<int> old = it->tiles;
      it->type = MeldType::Kakan;
      it->tiles.push_back(a.tile);
      remove_tile(pl.hand, a.tile);
      touch(seat);
      ++pl.kans, ++kans_total_, kan_players_mask_ |= 1 << seat;
      any_call_ = true;
      for (auto& q : p_) q.ippatsu = false;
      if (record_) emit(R"({"type":"kakan","actor":)" + std::to_string(seat) + ",\"pai\":" + tile_json(a.tile) +
           ",\"consumed\":" + tiles_json(old) + "}");
      while (pending_dora_ > 0) reveal_dora();
      pending_dora_ = 1;
      claim_tile_ = a.tile, claim_from_ = seat, claim_kind_ = ClaimKind::Kakan;
      kan_actor_after_claims_ = seat;
      open_claims();
      return;
    }
    default:
      throw std::logic_error("mahjong engine: unexpected self action");
  }
}

void Game::reveal_dora_now() {
  ++dora_shown_;
  if (record_) emit(R"({"type":"dora","dora_marker":)" + tile_json(wall_[kDeadDora + dora_shown_ - 1]) + "}");
}

void Game::reveal_dora() {
  --pending_dora_;
  reveal_dora_now();
}

void Game::do_discard(int seat, int tile, bool riichi) {
  Player& pl = p_[seat];
  if (pl.riichi) pl.ippatsu = false;  // the first discard after riichi ends the ippatsu window
  if (riichi) {
    if (record_) emit(R"({"type":"reach","actor":)" + std::to_string(seat) + "}");
    pl.double_riichi = !any_call_ && pl.discards.empty();
    pl.riichi = true;
    pl.ippatsu = true;
    riichi_pending_seat_ = seat;
  }
  const bool tsumogiri = tile == drawn_;
  remove_tile(pl.hand, tile);
  touch(seat);
  if (riichi) pl.riichi_index = static_cast<int>(pl.discards.size());
  pl.discards.push_back(tile);
  pl.discard_called.push_back(false);
  pl.discard_tsumogiri.push_back(tsumogiri);
  pl.discard_turn.push_back(static_cast<uint8_t>(turns_));
  pl.temp_furiten = false;
  pl.kuikae = 0;
  drawn_ = -1;
  after_call_ = false;
  ++turns_;
  if (record_) emit(R"({"type":"dahai","actor":)" + std::to_string(seat) + ",\"pai\":" + tile_json(tile) +
       ",\"tsumogiri\":" + (tsumogiri ? "true" : "false") + "}");
  while (pending_dora_ > 0) reveal_dora();
  claim_tile_ = tile, claim_from_ = seat, claim_kind_ = ClaimKind::Discard;
  kan_actor_after_claims_ = -1;
  open_claims();
}

void Game::open_claims() {
  bool any = false;
  for (int s = 0; s < 4; ++s) {
    claim_options_[s] = claim_actions(s);
    claim_done_[s] = claim_options_[s].empty();
    claim_choice_[s] = Action{};
    any |= !claim_done_[s];
  }
  phase_ = Phase::Claims;
  if (!any) resolve_claims();
}

void Game::resolve_claims() {
  const int from = claim_from_;
  const int k = kind_of(claim_tile_);
  std::vector<int> rons;
  for (int i = 1; i < 4; ++i) {
    const int s = (from + i) % 4;
    if (claim_choice_[s].type == ActionType::Ron && claim_done_[s] && !claim_options_[s].empty()) rons.push_back(s);
  }
  // Seats that let a winning tile pass are furiten until their next discard (for good in riichi).
  for (int s = 0; s < 4; ++s) {
    if (s == from || std::find(rons.begin(), rons.end(), s) != rons.end()) continue;
    if (waits(s) >> k & 1) {
      p_[s].temp_furiten = true;
      if (p_[s].riichi) p_[s].riichi_furiten = true;
    }
  }
  if (!rons.empty()) {
    if (rons.size() == 3 && rules_.triple_ron_abort) {
      end_hand_draw("sanchaho", false);
      return;
    }
    if (!rules_.double_ron) rons.resize(1);
    end_hand_win(rons, from, claim_tile_, claim_kind_ != ClaimKind::Discard);
    return;
  }
  if (claim_kind_ != ClaimKind::Discard) {  // kan not robbed: rinshan draw
    actor_ = kan_actor_after_claims_;
    draw(true);
    return;
  }
  if (riichi_pending_seat_ >= 0) {
    const int s = riichi_pending_seat_;
    riichi_pending_seat_ = -1;
    scores_[s] -= 1000;
    ++sticks_;
    ++riichi_declared_;
    std::string deltas = "[";
    for (int i = 0; i < 4; ++i) deltas += std::string(i ? "," : "") + (i == s ? "-1000" : "0");
    if (record_) emit(R"({"type":"reach_accepted","actor":)" + std::to_string(s) + ",\"deltas\":" + deltas + "],\"scores\":" +
         scores_json() + "}");
    if (rules_.suucha_riichi && riichi_declared_ == 4) {
      end_hand_draw("suuchariichi", false);
      return;
    }
  }
  // Pon / daiminkan outrank chi.
  int caller = -1;
  for (int i = 1; i < 4 && caller < 0; ++i) {
    const int s = (from + i) % 4;
    const ActionType t = claim_choice_[s].type;
    if (t == ActionType::Pon || t == ActionType::Daiminkan) caller = s;
  }
  for (int i = 1; i < 4 && caller < 0; ++i) {
    const int s = (from + i) % 4;
    if (claim_choice_[s].type == ActionType::Chi) caller = s;
  }
  if (caller < 0) {
    after_discard_passes();
    return;
  }
  const Action a = claim_choice_[caller];
  Player& pl = p_[caller];
  p_[from].discard_called.back() = true;
  any_call_ = true;
  for (auto& q : p_) q.ippatsu = false;
  Meld m;
  m.tiles.push_back(a.tile);
  std::vector<int> used;
  for (int c : a.consumed)
    if (c >= 0) used.push_back(c), remove_tile(pl.hand, c), m.tiles.push_back(c);
  const char* name = a.type == ActionType::Chi ? "chi" : a.type == ActionType::Pon ? "pon" : "daiminkan";
  m.type = a.type == ActionType::Chi ? MeldType::Chi : a.type == ActionType::Pon ? MeldType::Pon : MeldType::Daiminkan;
  pl.melds.push_back(m);
  touch(caller);
  if (record_) emit(std::string(R"({"type":")") + name + "\",\"actor\":" + std::to_string(caller) + ",\"target\":" +
       std::to_string(from) + ",\"pai\":" + tile_json(a.tile) + ",\"consumed\":" + tiles_json(used) + "}");
  actor_ = caller;
  if (a.type != ActionType::Chi && is_honor(k) && pl.pao_from < 0) {
    // The call that completes the third dragon set / fourth wind set makes its discarder liable.
    int dragons = 0, winds = 0;
    for (const Meld& md : pl.melds) {
      if (md.type == MeldType::Chi) continue;
      const int mk = kind_of(md.tiles[0]);
      dragons += mk >= kHaku;
      winds += mk >= kEast && mk < kHaku;
    }
    if (k >= kHaku && dragons == 3) pl.pao_from = from, pl.pao_yaku = kDaisangen;
    if (k < kHaku && winds == 4) pl.pao_from = from, pl.pao_yaku = kDaisuushi;
  }
  if (a.type == ActionType::Daiminkan) {
    ++pl.kans, ++kans_total_, kan_players_mask_ |= 1 << caller;
    while (pending_dora_ > 0) reveal_dora();
    pending_dora_ = 1;
    draw(true);
    return;
  }
  // Swap-calling ban for the discard that follows the call.
  uint64_t forbid = 1ull << k;
  if (a.type == ActionType::Chi) {
    const int lo = std::min({kind_of(a.consumed[0]), kind_of(a.consumed[1]), k});
    if (lo == k && rank_of(k) + 3 <= 8) forbid |= 1ull << (k + 3);
    if (lo + 2 == k && rank_of(k) >= 3) forbid |= 1ull << (k - 3);
  }
  pl.kuikae = forbid;
  drawn_ = -1;
  after_call_ = true;
  rinshan_turn_ = false;
  phase_ = Phase::SelfTurn;
}

void Game::after_discard_passes() {
  if (rules_.suukaikan && kans_total_ == 4 && popcount64(static_cast<uint64_t>(kan_players_mask_)) > 1) {
    end_hand_draw("sukaikan", false);
    return;
  }
  if (rules_.suufon_renda && turns_ == 4 && !any_call_) {
    const int k0 = kind_of(p_[dealer()].discards[0]);
    bool same = k0 >= 27 && k0 <= 30;
    for (int s = 0; s < 4 && same; ++s) same = p_[s].discards.size() == 1 && kind_of(p_[s].discards[0]) == k0;
    if (same) {
      end_hand_draw("sufonrenda", false);
      return;
    }
  }
  if (tiles_left() == 0) {
    end_hand_draw("fanpai", true);
    return;
  }
  actor_ = (claim_from_ + 1) % 4;
  draw(false);
}

void Game::end_hand_win(const std::vector<int>& winners, int loser, int win_tile, bool chankan) {
  bool dealer_won = false;
  for (size_t i = 0; i < winners.size(); ++i) {
    const int w = winners[i];
    WinRecord rec;
    rec.winner = w;
    rec.loser = loser;
    rec.input = win_input(w, win_tile, loser < 0, chankan);
    if (i > 0) rec.input.honba = 0, rec.input.riichi_sticks = 0;  // the first claimant takes them
    rec.result = score_hand(rec.input, rules_.scoring);
    if (!rec.result.ok) throw std::logic_error("mahjong engine: a legal win failed to score: " + rec.result.error);
    rec.deltas = score_deltas(rec.result, w, loser, dealer());
    if (rules_.pao) apply_pao(rec);
    for (int s = 0; s < 4; ++s) scores_[s] += rec.deltas[s];
    dealer_won |= w == dealer();
    if (record_) {
      std::string yakus = "[";
      for (size_t j = 0; j < rec.result.yaku.size(); ++j)
        yakus += (j ? ",[" : "[") + jstr(yaku_name(rec.result.yaku[j].first)) + "," + std::to_string(rec.result.yaku[j].second) + "]";
      auto add = [&](const char* n, int v) {
        if (v) yakus += std::string(yakus.size() > 1 ? "," : "") + "[" + jstr(n) + "," + std::to_string(v) + "]";
      };
      add("dora", rec.result.dora), add("aka_dora", rec.result.aka), add("ura_dora", rec.result.ura);
      std::string deltas = "[";
      for (int s = 0; s < 4; ++s) deltas += (s ? "," : "") + std::to_string(rec.deltas[s]);
      std::vector<int> hora_hand = p_[w].hand;
      std::string ev = R"({"type":"hora","actor":)" + std::to_string(w) + ",\"target\":" +
                       std::to_string(loser < 0 ? w : loser) + ",\"pai\":" + tile_json(win_tile) +
                       ",\"uradora_markers\":" + (rec.input.riichi ? tiles_json(rec.input.ura_indicators) : "[]") +
                       ",\"hora_tehais\":" + tiles_json(hora_hand) + ",\"yakus\":" + yakus + "],\"fu\":" +
                       std::to_string(rec.result.fu) + ",\"fan\":" + std::to_string(rec.result.han) +
                       ",\"hora_points\":" + std::to_string(rec.result.pay.total - rec.result.pay.kyoutaku_bonus -
                                                            (rec.result.pay.main_bonus + 2 * rec.result.pay.additional_bonus)) +
                       ",\"deltas\":" + deltas + "],\"scores\":" + scores_json() + "}";
      emit(ev);
    }
    wins_.push_back(std::move(rec));
  }
  sticks_ = 0;
  next_hand(dealer_won, dealer_won);
}

void Game::apply_pao(WinRecord& rec) const {
  // Tenhou: the liable seat pays the whole pao yakuman on a tsumo (with the honba), and
  // half of it on another seat's deal-in (the discarder pays the other half, the rest of
  // the hand and the honba). Other yakuman in the hand are paid as usual.
  const Player& pl = p_[rec.winner];
  const int liable = pl.pao_from;
  if (liable < 0 || liable == rec.winner || !rec.result.yakuman) return;
  int han_p = 0;
  for (auto [y, h] : rec.result.yaku)
    if (y == pl.pao_yaku) han_p = h;
  if (han_p == 0 || liable == rec.loser) return;
  const int w = rec.winner;
  const bool dealer_win = w == dealer();
  const int unit = dealer_win ? 48000 : 32000;  // ron value of one yakuman (13 han)
  const int pao_value = unit * (han_p / 13);
  const int rest = rec.result.han - han_p;
  const int honba = rec.input.honba;
  std::array<int, 4> d{};
  auto pay = [&](int from, int amount) { d[from] -= amount, d[w] += amount; };
  if (rec.loser < 0) {
    if (rest > 0) {
      const Payment pr = compute_payment(rest, 0, true, dealer_win, true, 0, 0, rules_.scoring);
      for (int s = 0; s < 4; ++s)
        if (s != w) pay(s, (s == dealer() && !dealer_win) ? pr.main : pr.additional);
    }
    pay(liable, pao_value + 300 * honba);
  } else {
    pay(liable, pao_value / 2);
    pay(rec.loser, pao_value / 2 + unit * (rest / 13) + 300 * honba);
  }
  d[w] += rec.result.pay.kyoutaku_bonus;
  rec.deltas = d;
  rec.pao = liable;
}

void Game::end_hand_draw(const char* reason, bool exhaustive) {
  std::array<int, 4> d{};
  std::array<bool, 4> tenpai{};
  bool renchan = true;
  if (exhaustive) {
    for (int s = 0; s < 4; ++s) tenpai[s] = waits(s) != 0;
    bool nagashi = false;
    if (rules_.nagashi_mangan) {
      for (int s = 0; s < 4; ++s) {
        const Player& pl = p_[s];
        bool ok = !pl.discards.empty();
        for (size_t i = 0; i < pl.discards.size() && ok; ++i) ok = is_yaochu(kind_of(pl.discards[i])) && !pl.discard_called[i];
        if (!ok) continue;
        nagashi = true;
        // Paid as a mangan tsumo, without honba.
        for (int o = 0; o < 4; ++o) {
          if (o == s) continue;
          const int pay = (s == dealer() || o == dealer()) ? 4000 : 2000;
          d[o] -= pay, d[s] += pay;
        }
      }
    }
    if (nagashi) {
      reason = "nagashimangan";
    } else {
      const int n = static_cast<int>(std::count(tenpai.begin(), tenpai.end(), true));
      if (n > 0 && n < 4)
        for (int s = 0; s < 4; ++s) d[s] = tenpai[s] ? 3000 / n : -3000 / (4 - n);
    }
    renchan = tenpai[dealer()];
  }
  for (int s = 0; s < 4; ++s) scores_[s] += d[s];
  if (record_) {
    std::string ev = R"({"type":"ryukyoku","reason":")" + std::string(reason) + "\",\"tenpais\":[";
    for (int s = 0; s < 4; ++s) ev += std::string(s ? "," : "") + (tenpai[s] ? "true" : "false");
    ev += "],\"tehais\":[";
    for (int s = 0; s < 4; ++s) ev += (s ? "," : "") + tiles_json(p_[s].hand);
    ev += "],\"deltas\":[";
    for (int s = 0; s < 4; ++s) ev += (s ? "," : "") + std::to_string(d[s]);
    emit(ev + "],\"scores\":" + scores_json() + "}");
  }
  next_hand(renchan, true);
}

void Game::next_hand(bool renchan, bool honba_up) {
  if (record_) emit(R"({"type":"end_kyoku"})");
  ++hands_played_;
  if (rules_.bust_ends && std::any_of(scores_.begin(), scores_.end(), [](int s) { return s < 0; })) {
    finish_game();
    return;
  }
  const int last = rules_.east_only ? 3 : 7;  // all-last hand index
  const int cap = last + 4;                   // one extra wind at most
  const int top = static_cast<int>(std::max_element(scores_.begin(), scores_.end()) - scores_.begin());
  const bool someone_home = scores_[top] >= rules_.return_points;
  if (kyoku_ >= last) {
    if (renchan) {
      const bool may_stop = rules_.agari_yame || kyoku_ > last;
      if (may_stop && top == dealer() && someone_home) {
        finish_game();
        return;
      }
    } else if (someone_home || kyoku_ + 1 > cap) {
      finish_game();
      return;
    }
  }
  if (!renchan) ++kyoku_;
  honba_ = honba_up ? honba_ + 1 : 0;
  start_hand();
}

void Game::finish_game() {
  // Sticks left on the table go to the top player (ties: seat order from the first dealer).
  const int top = static_cast<int>(std::max_element(scores_.begin(), scores_.end()) - scores_.begin());
  scores_[top] += 1000 * sticks_;
  sticks_ = 0;
  phase_ = Phase::GameOver;
  if (record_) emit(R"({"type":"end_game","scores":)" + scores_json() + "}");
}

}  // namespace meeple::mj
