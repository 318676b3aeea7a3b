#include "score.hpp"

#include <algorithm>
#include <tuple>

namespace meeple::mj {

namespace {

struct YakuInfo {
  const char* name;
  int han_closed;
  int han_open;  // 0: closed only
  bool yakuman;
};

constexpr YakuInfo kYaku[kNumYaku] = {
    {"tsumo", 1, 0, false},
    {"riichi", 1, 0, false},
    {"daburu_riichi", 2, 0, false},
    {"ippatsu", 1, 0, false},
    {"rinshan", 1, 1, false},
    {"chankan", 1, 1, false},
    {"haitei", 1, 1, false},
    {"houtei", 1, 1, false},
    {"pinfu", 1, 0, false},
    {"tanyao", 1, 1, false},
    {"iipeiko", 1, 0, false},
    {"haku", 1, 1, false},
    {"hatsu", 1, 1, false},
    {"chun", 1, 1, false},
    {"seat_wind_east", 1, 1, false},
    {"seat_wind_south", 1, 1, false},
    {"seat_wind_west", 1, 1, false},
    {"seat_wind_north", 1, 1, false},
    {"round_wind_east", 1, 1, false},
    {"round_wind_south", 1, 1, false},
    {"round_wind_west", 1, 1, false},
    {"round_wind_north", 1, 1, false},
    {"chiitoitsu", 2, 0, false},
    {"chantai", 2, 1, false},
    {"ittsu", 2, 1, false},
    {"sanshoku", 2, 1, false},
    {"sanshoku_douko", 2, 2, false},
    {"sankantsu", 2, 2, false},
    {"toitoi", 2, 2, false},
    {"sanankou", 2, 2, false},
    {"shosangen", 2, 2, false},
    {"honroto", 2, 2, false},
    {"honitsu", 3, 2, false},
    {"junchan", 3, 2, false},
    {"ryanpeiko", 3, 0, false},
    {"chinitsu", 6, 5, false},
    {"kokushi", 13, 0, true},
    {"daburu_kokushi", 26, 0, true},
    {"suuankou", 13, 0, true},
    {"suuankou_tanki", 26, 0, true},
    {"daisangen", 13, 13, true},
    {"shosuushi", 13, 13, true},
    {"daisuushi", 26, 26, true},
    {"tsuisou", 13, 13, true},
    {"chinroto", 13, 13, true},
    {"ryuisou", 13, 13, true},
    {"chuuren_poutou", 13, 0, true},
    {"daburu_chuuren_poutou", 26, 0, true},
    {"suukantsu", 13, 13, true},
    {"tenhou", 13, 0, true},
    {"chiihou", 13, 0, true},
};

enum GroupType : uint8_t { kPair, kChi, kPon, kKan };

struct Group {
  uint8_t kind;  // first (lowest) kind
  uint8_t type;
  bool open;    // from an opened meld
  bool meld;    // declared meld (open or ankan)
  bool contains(int k) const {
    return type == kChi ? (k >= kind && k <= kind + 2) : k == kind;
  }
  bool is_pon_or_kan() const { return type == kPon || type == kKan; }
  int last() const { return type == kChi ? kind + 2 : kind; }
};

using Groups = std::vector<Group>;

void decompose(Counts& c, int i, bool has_pair, Groups& cur, std::vector<Groups>& out) {
  while (i < kNumKinds && c[i] == 0) ++i;
  if (i == kNumKinds) {
    if (has_pair) out.push_back(cur);
    return;
  }
  if (!has_pair && c[i] >= 2) {
    c[i] -= 2;
    cur.push_back({static_cast<uint8_t>(i), kPair, false, false});
    decompose(c, i, true, cur, out);
    cur.pop_back();
    c[i] += 2;
  }
  if (c[i] >= 3) {
    c[i] -= 3;
    cur.push_back({static_cast<uint8_t>(i), kPon, false, false});
    decompose(c, i, has_pair, cur, out);
    cur.pop_back();
    c[i] += 3;
  }
  if (!is_honor(i) && rank_of(i) <= 6 && c[i + 1] && c[i + 2]) {
    --c[i], --c[i + 1], --c[i + 2];
    cur.push_back({static_cast<uint8_t>(i), kChi, false, false});
    decompose(c, i, has_pair, cur, out);
    cur.pop_back();
    ++c[i], ++c[i + 1], ++c[i + 2];
  }
}

bool is_green(int k) {
  return k == 19 || k == 20 || k == 21 || k == 23 || k == 25 || k == kHatsu;
}

struct Candidate {
  bool error = true;
  int han = 0, fu = 0, fu_raw = 0;
  bool yakuman = false;
  std::vector<std::pair<int, int>> yaku;
  int dora = 0, aka = 0, ura = 0;
  std::string limit;
  Payment pay;
  auto priority() const {
    return std::make_tuple(error ? -1 : pay.total, yakuman, han, fu);
  }
};

void check_input(const WinInput& in) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("score_hand: " + m); };
  std::array<bool, kNumTiles> seen{};
  auto use = [&](int t, const char* where) {
    if (t < 0 || t >= kNumTiles) fail(std::string(where) + " tile id " + std::to_string(t) + " is not in [0, 136)");
    if (seen[t]) fail(std::string(where) + " tile id " + std::to_string(t) + " (" + tile_to_mjai(t, true) + ") is used twice");
    seen[t] = true;
  };
  for (int t : in.closed) use(t, "closed");
  for (const Meld& m : in.melds) {
    const size_t want = m.is_kan() ? 4 : 3;
    if (m.tiles.size() != want) fail("a meld has " + std::to_string(m.tiles.size()) + " tiles, expected " + std::to_string(want));
    for (int t : m.tiles) use(t, "meld");
    std::vector<int> k;
    for (int t : m.tiles) k.push_back(kind_of(t));
    std::sort(k.begin(), k.end());
    const bool same = std::all_of(k.begin(), k.end(), [&](int x) { return x == k[0]; });
    const bool run = k.size() == 3 && !is_honor(k[0]) && k[1] == k[0] + 1 && k[2] == k[0] + 2 && suit_of(k[0]) == suit_of(k[2]);
    if (m.type == MeldType::Chi ? !run : !same) fail("a meld's tiles do not form its type (chi = three in a row, pon/kan = same kind)");
  }
  if (in.melds.size() > 4) fail("at most 4 melds, got " + std::to_string(in.melds.size()));
  const size_t want_closed = 14 - 3 * in.melds.size();
  if (in.closed.size() != want_closed) {
    fail("with " + std::to_string(in.melds.size()) + " melds the concealed part has " + std::to_string(want_closed) +
         " tiles (winning tile included), got " + std::to_string(in.closed.size()));
  }
  if (std::find(in.closed.begin(), in.closed.end(), in.win_tile) == in.closed.end()) fail("win_tile is not among the closed tiles");
  if (in.seat_wind < 0 || in.seat_wind > 3 || in.round_wind < 0 || in.round_wind > 3) fail("seat_wind and round_wind must be in 0..3 (E S W N)");
  for (int t : in.dora_indicators) if (t < 0 || t >= kNumTiles) fail("dora indicator id out of [0, 136)");
  for (int t : in.ura_indicators) if (t < 0 || t >= kNumTiles) fail("ura indicator id out of [0, 136)");
  if (in.honba < 0 || in.riichi_sticks < 0) fail("honba and riichi_sticks must be >= 0");
  const bool open = std::any_of(in.melds.begin(), in.melds.end(), [](const Meld& m) { return m.opened(); });
  if ((in.riichi || in.double_riichi) && open) fail("riichi needs a closed hand");
  if (in.double_riichi && !in.riichi) fail("double_riichi implies riichi");
  if (in.ippatsu && !in.riichi) fail("ippatsu needs riichi");
  if (in.chankan && in.tsumo) fail("chankan is a ron");
  if (in.rinshan && !in.tsumo) fail("rinshan is a tsumo");
  if (in.haitei && !in.tsumo) fail("haitei is a tsumo");
  if (in.houtei && in.tsumo) fail("houtei is a ron");
  if (in.haitei && in.rinshan) fail("haitei and rinshan exclude each other");
  if (in.houtei && in.chankan) fail("houtei and chankan exclude each other");
  if (in.tenhou && (in.seat_wind != 0 || !in.tsumo || !in.melds.empty())) fail("tenhou is a dealer's closed tsumo");
  if (in.chiihou && (in.seat_wind == 0 || !in.tsumo || !in.melds.empty())) fail("chiihou is a non-dealer's closed tsumo");
}

}  // namespace

const char* yaku_name(int yaku) {
  if (yaku < 0 || yaku >= kNumYaku) throw std::invalid_argument("yaku id out of range");
  return kYaku[yaku].name;
}

bool yaku_is_yakuman(int yaku) { return yaku >= 0 && yaku < kNumYaku && kYaku[yaku].yakuman; }

Payment compute_payment(int han, int fu, bool yakuman, bool dealer, bool tsumo, int honba,
                        int riichi_sticks, const Rules& rules, std::string* limit) {
  std::string level;
  if (han >= 13 && !yakuman) {
    han = rules.kazoe_yakuman ? 13 : 12;
    level = rules.kazoe_yakuman ? "kazoe yakuman" : "kazoe sanbaiman";
  }
  long base;  // "rounded": the non-dealer tsumo share
  long d2, d4, d6;
  if (han >= 5) {
    if (han >= 78) level = "6x yakuman", base = 48000;
    else if (han >= 65) level = "5x yakuman", base = 40000;
    else if (han >= 52) level = "4x yakuman", base = 32000;
    else if (han >= 39) level = "3x yakuman", base = 24000;
    else if (han >= 26) level = "2x yakuman", base = 16000;
    else if (han >= 13) { if (level.empty() || yakuman) level = "yakuman"; base = 8000; }
    else if (han >= 11) { if (level.empty()) level = "sanbaiman"; base = 6000; }
    else if (han >= 8) level = "baiman", base = 4000;
    else if (han >= 6) level = "haneman", base = 3000;
    else level = "mangan", base = 2000;
    d2 = base * 2, d4 = base * 4, d6 = base * 6;
  } else {
    const long bp = static_cast<long>(fu) << (2 + han);
    auto up = [](long x) { return (x + 99) / 100 * 100; };
    base = up(bp), d2 = up(2 * bp), d4 = up(4 * bp), d6 = up(6 * bp);
    bool mangan = base > 2000;
    if (rules.kiriage && ((han == 4 && fu == 30) || (han == 3 && fu == 60))) mangan = true;
    if (mangan) {
      level = "mangan";
      base = 2000, d2 = 4000, d4 = 8000, d6 = 12000;
    }
  }
  Payment p;
  if (tsumo) {
    p.main = static_cast<int>(d2);
    p.main_bonus = 100 * honba;
    p.additional = static_cast<int>(dealer ? d2 : base);
    p.additional_bonus = p.main_bonus;
  } else {
    p.main = static_cast<int>(dealer ? d6 : d4);
    p.main_bonus = 300 * honba;
  }
  p.kyoutaku_bonus = 1000 * riichi_sticks;
  p.total = p.main + p.main_bonus + 2 * (p.additional + p.additional_bonus) + p.kyoutaku_bonus;
  if (limit) *limit = level;
  return p;
}

std::array<int, 4> score_deltas(const ScoreResult& r, int winner, int loser, int dealer) {
  std::array<int, 4> d{};
  if (!r.ok) return d;
  const Payment& p = r.pay;
  if (loser >= 0) {
    d[loser] -= p.main + p.main_bonus;
    d[winner] += p.main + p.main_bonus;
  } else {
    for (int s = 0; s < 4; ++s) {
      if (s == winner) continue;
      const int pay = (s == dealer && winner != dealer) ? p.main + p.main_bonus : p.additional + p.additional_bonus;
      d[s] -= pay;
      d[winner] += pay;
    }
  }
  d[winner] += p.kyoutaku_bonus;
  return d;
}

ScoreResult score_hand(const WinInput& in, const Rules& rules) {
  check_input(in);
  const int win = kind_of(in.win_tile);
  const bool dealer = in.seat_wind == 0;
  const bool open = std::any_of(in.melds.begin(), in.melds.end(), [](const Meld& m) { return m.opened(); });
  const bool any_riichi = in.riichi || in.double_riichi;

  Counts closed{}, all{};
  for (int t : in.closed) ++closed[kind_of(t)], ++all[kind_of(t)];
  Groups meld_groups;
  int kans = 0;
  for (const Meld& m : in.melds) {
    int lo = kNumKinds;
    for (int t : m.tiles) lo = std::min(lo, kind_of(t)), ++all[kind_of(t)];
    const uint8_t type = m.type == MeldType::Chi ? kChi : m.is_kan() ? kKan : kPon;
    kans += m.is_kan();
    meld_groups.push_back({static_cast<uint8_t>(lo), type, m.opened(), true});
  }
  for (int k = 0; k < kNumKinds; ++k) {
    if (all[k] > 4) throw std::invalid_argument("score_hand: more than 4 copies of " + kind_to_mjai(k));
  }

  // Dora: every tile of the hand and melds (kans count all four).
  auto count_dora = [&](const std::vector<int>& indicators) {
    int n = 0;
    for (int t : indicators) n += all[dora_of(kind_of(t))];
    return n;
  };
  const int dora = count_dora(in.dora_indicators);
  int aka = 0;
  if (rules.red_fives) {
    for (int t : in.closed) aka += is_red(t);
    for (const Meld& m : in.melds) for (int t : m.tiles) aka += is_red(t);
  }
  const int ura = any_riichi ? count_dora(in.ura_indicators) : 0;

  std::vector<Groups> readings;
  {
    Counts c = closed;
    Groups cur;
    decompose(c, 0, false, cur, readings);
    if (in.melds.empty()) {
      Groups pairs;
      for (int k = 0; k < kNumKinds; ++k) {
        if (closed[k] == 2) pairs.push_back({static_cast<uint8_t>(k), kPair, false, false});
      }
      if (pairs.size() == 7) readings.push_back(pairs);
    }
  }

  const int seat_wind_kind = kEast + in.seat_wind;
  const int round_wind_kind = kEast + in.round_wind;
  const int han_double = rules.double_yakuman ? 26 : 13;

  Candidate best;
  bool have_best = false;
  auto consider = [&](Candidate&& c) {
    // Stable "sort by priority, then by raw fu" of the package: keep the first maximum.
    if (!have_best || c.priority() > best.priority() ||
        (c.priority() == best.priority() && c.fu_raw > best.fu_raw)) {
      best = std::move(c);
      have_best = true;
    }
  };

  for (Groups hand : readings) {
    hand.insert(hand.end(), meld_groups.begin(), meld_groups.end());
    const bool chiitoitsu = hand.size() == 7;
    int chi = 0, pon_kan = 0, suit_mask = 0, honor_groups = 0;
    bool tanyao = true, all_honor = true, all_yaochu = true, all_terminal = true, all_green = true;
    for (const Group& g : hand) {
      chi += g.type == kChi;
      pon_kan += g.is_pon_or_kan();
      if (is_honor(g.kind)) ++honor_groups;
      else suit_mask |= 1 << suit_of(g.kind);
      const int n = g.type == kChi ? 3 : 1;
      for (int k = g.kind; k < g.kind + n; ++k) {
        tanyao &= !is_yaochu(k);
        all_honor &= is_honor(k);
        all_yaochu &= is_yaochu(k);
        all_terminal &= is_terminal(k);
        all_green &= is_green(k);
      }
    }
    const bool one_suit = suit_mask == 1 || suit_mask == 2 || suit_mask == 4;

    // Yaku that do not depend on which group the winning tile completed.
    std::vector<int> yaku;
    if (in.tsumo && !open) yaku.push_back(kMenzenTsumo);
    if (chiitoitsu) yaku.push_back(kChiitoitsu);
    if ((!open || rules.open_tanyao) && tanyao) yaku.push_back(kTanyao);
    if (in.riichi && !in.double_riichi) yaku.push_back(kRiichi);
    if (in.double_riichi) yaku.push_back(kDoubleRiichi);
    if (in.ippatsu) yaku.push_back(kIppatsu);
    if (in.rinshan) yaku.push_back(kRinshan);
    if (in.chankan) yaku.push_back(kChankan);
    if (in.haitei) yaku.push_back(kHaitei);
    if (in.houtei) yaku.push_back(kHoutei);
    if (in.tenhou) yaku.push_back(kTenhou);
    if (in.chiihou) yaku.push_back(kChiihou);
    if (one_suit && honor_groups == 0) yaku.push_back(kChinitsu);
    else if (one_suit) yaku.push_back(kHonitsu);
    if (chi == 0) {
      if (honor_groups > 0 && all_honor) yaku.push_back(kTsuisou);
      if (!tanyao) {
        if (all_yaochu) yaku.push_back(kHonroto);
        if (honor_groups == 0 && all_terminal) yaku.push_back(kChinroto);
      }
    }
    if (all_green) yaku.push_back(kRyuisou);
    if (chi > 0) {
      if (!tanyao) {
        int term = 0, hon = 0;
        for (const Group& g : hand) {
          if (!is_honor(g.kind) && (is_terminal(g.kind) || is_terminal(g.last()))) ++term;
          else if (is_honor(g.kind)) ++hon;
        }
        if (term + hon == 5 && term && hon) yaku.push_back(kChantai);
        if (term == 5) yaku.push_back(kJunchan);
        int ittsu[3] = {0, 0, 0};
        for (const Group& g : hand) {
          if (g.type == kChi && rank_of(g.kind) % 3 == 0) ittsu[suit_of(g.kind)] |= 1 << (rank_of(g.kind) / 3);
        }
        if (ittsu[0] == 7 || ittsu[1] == 7 || ittsu[2] == 7) yaku.push_back(kIttsu);
      }
      if (!open) {
        int same[34] = {};
        for (const Group& g : hand) same[g.kind] += g.type == kChi;
        int pairs = 0;
        for (int v : same) pairs += v / 2;
        if (pairs >= 2) yaku.push_back(kRyanpeiko);
        else if (pairs == 1) yaku.push_back(kIipeiko);
      }
      if (suit_mask == 7) {
        int m[3] = {0, 0, 0};
        for (const Group& g : hand) if (g.type == kChi) m[suit_of(g.kind)] |= 1 << rank_of(g.kind);
        if (m[0] & m[1] & m[2]) yaku.push_back(kSanshoku);
      }
    }
    if (pon_kan > 0) {
      if (pon_kan == 4) yaku.push_back(kToitoi);
      // Concealed triplets: on a ron the triplet of the winning kind counts as open unless
      // a concealed sequence could have taken the winning tile instead.
      int closed_pk = 0;
      bool chi_with_win = false;
      for (const Group& g : hand) {
        if (g.is_pon_or_kan() && !g.open) ++closed_pk;
        if (g.type == kChi && !g.open && g.contains(win)) {
          // As the package does, a concealed sequence equal to an open chi does not count.
          bool same_as_open = false;
          for (const Group& m : meld_groups) same_as_open |= m.open && m.type == kChi && m.kind == g.kind;
          chi_with_win |= !same_as_open;
        }
      }
      if (!in.tsumo && !chi_with_win) {
        for (const Group& g : hand) {
          if (g.is_pon_or_kan() && !g.open && g.kind == win) { --closed_pk; break; }
        }
      }
      if (closed_pk == 3) yaku.push_back(kSanankou);
      if (suit_mask == 7) {
        int m[3] = {0, 0, 0};
        for (const Group& g : hand) if (g.is_pon_or_kan() && !is_honor(g.kind)) m[suit_of(g.kind)] |= 1 << rank_of(g.kind);
        if (m[0] & m[1] & m[2]) yaku.push_back(kSanshokuDouko);
      }
      if (honor_groups > 0) {
        int dragon_sets = 0, wind_sets = 0, wind_pairs = 0;
        bool set_of[34] = {};
        for (const Group& g : hand) {
          if (g.kind >= kHaku && (g.type == kPair || g.is_pon_or_kan())) ++dragon_sets;
          if (g.kind >= kEast && g.kind < kHaku) {
            wind_pairs += g.type == kPair;
            wind_sets += g.is_pon_or_kan();
          }
          if (g.is_pon_or_kan()) set_of[g.kind] = true;
        }
        if (dragon_sets == 3) yaku.push_back(kShosangen);
        if (set_of[kHaku]) yaku.push_back(kYakuhaiHaku);
        if (set_of[kHatsu]) yaku.push_back(kYakuhaiHatsu);
        if (set_of[kChun]) yaku.push_back(kYakuhaiChun);
        if (set_of[seat_wind_kind]) yaku.push_back(kSeatEast + in.seat_wind);
        if (set_of[round_wind_kind]) yaku.push_back(kRoundEast + in.round_wind);
        if (set_of[kHaku] && set_of[kHatsu] && set_of[kChun]) yaku.push_back(kDaisangen);
        if (wind_sets == 3 && wind_pairs == 1) yaku.push_back(kShosuushi);
        if (wind_sets == 4) yaku.push_back(kDaisuushi);
      }
      if (in.melds.empty() && !tanyao && one_suit && honor_groups == 0) {
        int c[9] = {};
        for (int r = 0; r < 9; ++r) c[r] = closed[suit_of(hand[0].kind) * 9 + r];
        bool ok = c[0] >= 3 && c[8] >= 3;
        if (ok) {
          c[0] -= 2, c[8] -= 2;
          int twos = 0;
          for (int v : c) {
            if (v == 2) ++twos;
            else if (v != 1) ok = false;
          }
          ok = ok && twos == 1;
        }
        if (ok) yaku.push_back(closed[win] == 2 || closed[win] == 4 ? kChuuren9 : kChuuren);
      }
      if (!open) {
        int concealed = 0;
        for (const Group& g : hand) {
          if (!in.tsumo && g.contains(win) && g.is_pon_or_kan()) continue;
          concealed += g.is_pon_or_kan();
        }
        if (concealed == 4) yaku.push_back(all[win] == 2 ? kSuuankouTanki : kSuuankou);
      }
      if (kans == 3) yaku.push_back(kSankantsu);
      if (kans == 4) yaku.push_back(kSuukantsu);
    }

    // Winning groups: distinct concealed groups holding the winning kind.
    std::vector<Group> win_groups;
    for (const Group& g : hand) {
      if (g.meld || !g.contains(win)) continue;
      bool dup = false;
      for (const Group& w : win_groups) dup |= (w.kind == g.kind && w.type == g.type);
      if (!dup) win_groups.push_back(g);
    }
    for (const Group& wg : win_groups) {
      // Fu.
      int fu_extra = 0, fu = 25, fu_raw = 25;
      if (!chiitoitsu) {
        if (wg.type == kChi) {
          const int r = rank_of(wg.kind);
          if ((r == 0 && win == wg.kind + 2) || (r == 6 && win == wg.kind)) fu_extra += 2;  // penchan
          if (win == wg.kind + 1) fu_extra += 2;                                          // kanchan
        }
        for (const Group& g : hand) {
          if (g.type != kPair) continue;
          const int valued = (g.kind >= kHaku) + (g.kind == seat_wind_kind) + (g.kind == round_wind_kind);
          fu_extra += valued == 1 ? 2 : valued >= 2 ? 4 : 0;
        }
        if (wg.type == kPair) fu_extra += 2;  // tanki
        for (const Group& g : hand) {
          if (!g.is_pon_or_kan()) continue;
          bool is_open = g.open;
          if (!in.tsumo && !g.meld && wg.type == kPon && wg.kind == g.kind) is_open = true;  // ron-completed
          int f = 2;
          if (g.type == kKan) f *= 4;
          if (!is_open) f *= 2;
          if (is_yaochu(g.kind)) f *= 2;
          fu_extra += f;
        }
        if (in.tsumo && fu_extra > 0) fu_extra += 2;
        if (open && fu_extra == 0) fu_extra += 2;
        fu_raw = fu_extra + ((open || in.tsumo) ? 20 : 30);
        fu = (fu_raw + 9) / 10 * 10;
      }
      const bool pinfu = !chiitoitsu && !open && fu_extra == 0;

      Candidate c;
      c.fu = fu;
      c.fu_raw = fu_raw;
      std::vector<int> ys = yaku;
      if (pinfu) ys.push_back(kPinfu);
      const bool has_yakuman = std::any_of(ys.begin(), ys.end(), [](int y) { return kYaku[y].yakuman; });
      if (has_yakuman) ys.erase(std::remove_if(ys.begin(), ys.end(), [](int y) { return !kYaku[y].yakuman; }), ys.end());
      int han = 0;
      for (int y : ys) {
        int h = (open && kYaku[y].han_open) ? kYaku[y].han_open : kYaku[y].han_closed;
        if (kYaku[y].yakuman && h == 26) h = han_double;
        c.yaku.emplace_back(y, h);
        han += h;
      }
      if (han > 0) {
        c.error = false;
        if (!has_yakuman) {
          c.dora = dora, c.aka = aka, c.ura = ura;
          han += dora + aka + ura;
        }
        if (han > 78) han = 78;
        c.han = han;
        c.yakuman = has_yakuman;
        c.pay = compute_payment(han, fu, has_yakuman, dealer, in.tsumo, in.honba, in.riichi_sticks, rules, &c.limit);
      }
      consider(std::move(c));
    }
  }

  // Thirteen orphans.
  if (!open) {
    int prod = 1;
    for (int k = 0; k < kNumKinds; ++k) if (is_yaochu(k)) prod *= all[k];
    if (prod == 2) {
      Candidate c;
      c.error = false;
      c.yakuman = true;
      c.yaku.emplace_back(all[win] == 2 ? kKokushi13 : kKokushi, all[win] == 2 ? han_double : 13);
      if (in.tenhou) c.yaku.emplace_back(kTenhou, 13);
      if (in.chiihou) c.yaku.emplace_back(kChiihou, 13);
      for (auto& y : c.yaku) c.han += y.second;
      c.fu = 0;
      c.pay = compute_payment(c.han, 0, true, dealer, in.tsumo, in.honba, in.riichi_sticks, rules, &c.limit);
      consider(std::move(c));
    }
  }

  ScoreResult r;
  if (!have_best) {
    r.error = "not a winning hand";
    return r;
  }
  if (best.error) {
    r.error = "no yaku";
    return r;
  }
  r.ok = true;
  r.han = best.han;
  r.fu = best.fu;
  r.yakuman = best.yakuman;
  r.yaku = std::move(best.yaku);
  r.dora = best.dora, r.aka = best.aka, r.ura = best.ura;
  r.limit = best.limit;
  r.pay = best.pay;
  return r;
}

}  // namespace meeple::mj
