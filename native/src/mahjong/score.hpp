// Winning-hand scoring: decomposition, yaku, fu, limits and payments with honba.
//
// Rules follow Tenhou (open tanyao, red fives, double yakuman for thirteen-wait kokushi,
// four-concealed tanki, pure nine gates and big four winds, kazoe yakuman at 13 han, no
// kiriage, 2 fu for an open pinfu-shaped ron, no renhou). Where a hand has several
// readings the most valuable one is scored, ranked by (total payment, yakuman, han, fu).
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "tiles.hpp"

namespace meeple::mj {

enum class MeldType : uint8_t { Chi, Pon, Daiminkan, Ankan, Kakan };

struct Meld {
  MeldType type = MeldType::Chi;
  std::vector<int> tiles;  // 136 ids: 3 for chi/pon, 4 for kans
  bool opened() const { return type != MeldType::Ankan; }
  bool is_kan() const {
    return type == MeldType::Daiminkan || type == MeldType::Ankan || type == MeldType::Kakan;
  }
};

enum Yaku : int {
  kMenzenTsumo, kRiichi, kDoubleRiichi, kIppatsu, kRinshan, kChankan, kHaitei, kHoutei,
  kPinfu, kTanyao, kIipeiko, kYakuhaiHaku, kYakuhaiHatsu, kYakuhaiChun,
  kSeatEast, kSeatSouth, kSeatWest, kSeatNorth, kRoundEast, kRoundSouth, kRoundWest, kRoundNorth,
  kChiitoitsu, kChantai, kIttsu, kSanshoku, kSanshokuDouko, kSankantsu, kToitoi, kSanankou,
  kShosangen, kHonroto, kHonitsu, kJunchan, kRyanpeiko, kChinitsu,
  // yakuman
  kKokushi, kKokushi13, kSuuankou, kSuuankouTanki, kDaisangen, kShosuushi, kDaisuushi,
  kTsuisou, kChinroto, kRyuisou, kChuuren, kChuuren9, kSuukantsu, kTenhou, kChiihou,
  kNumYaku
};

// Snake-case names (the attribute names of the `mahjong` package's YakuConfig).
const char* yaku_name(int yaku);
bool yaku_is_yakuman(int yaku);

struct Rules {
  bool red_fives = true;
  bool open_tanyao = true;
  bool double_yakuman = true;  // 13-wait kokushi, suuankou tanki, junsei chuuren, daisuushi
  bool kazoe_yakuman = true;   // 13+ han from regular yaku = yakuman (else sanbaiman)
  bool kiriage = false;        // 4 han 30 fu / 3 han 60 fu rounded up to mangan
};

struct WinInput {
  std::vector<int> closed;  // 136 ids of the concealed tiles, winning tile included
  std::vector<Meld> melds;
  int win_tile = -1;  // 136 id, one of `closed`
  bool tsumo = false, riichi = false, double_riichi = false, ippatsu = false;
  bool rinshan = false, chankan = false, haitei = false, houtei = false;
  bool tenhou = false, chiihou = false;
  int seat_wind = 0, round_wind = 0;  // 0..3 = E S W N; seat 0 is the dealer
  std::vector<int> dora_indicators, ura_indicators;  // 136 ids; ura counts only with riichi
  int honba = 0, riichi_sticks = 0;
};

struct Payment {
  // Ron: the discarder pays main + main_bonus. Tsumo: the dealer pays main + main_bonus
  // (a non-dealer winner) and every other player additional + additional_bonus; a dealer
  // winner gets additional + additional_bonus from each of the three.
  int main = 0, main_bonus = 0, additional = 0, additional_bonus = 0, kyoutaku_bonus = 0;
  int total = 0;
};

struct ScoreResult {
  bool ok = false;
  std::string error;  // "not a winning hand" or "no yaku" when !ok
  int han = 0, fu = 0;
  bool yakuman = false;
  std::vector<std::pair<int, int>> yaku;  // (yaku id, han), dora not included
  int dora = 0, aka = 0, ura = 0;
  std::string limit;  // "", mangan, haneman, baiman, sanbaiman, yakuman, kazoe yakuman, 2x yakuman ...
  Payment pay;
};

// Scores a win. Malformed input (bad ids, duplicated tiles, wrong tile count, win tile
// not in the hand, flags that contradict each other) throws std::invalid_argument.
ScoreResult score_hand(const WinInput& in, const Rules& rules = Rules{});

// Points for `han`/`fu` (the package's ScoresCalculator, honba and sticks included).
Payment compute_payment(int han, int fu, bool yakuman, bool dealer, bool tsumo, int honba,
                        int riichi_sticks, const Rules& rules, std::string* limit = nullptr);

// Score change per seat of a scored win (riichi sticks on the table go to the winner).
std::array<int, 4> score_deltas(const ScoreResult& r, int winner, int loser_or_minus1, int dealer);

}  // namespace meeple::mj
