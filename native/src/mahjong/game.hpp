// Riichi mahjong game state machine (4 players, Tenhou-style defaults).
//
// One Game plays a whole match: hands (kyoku) follow each other until the game ends.
// Decisions are asked seat by seat: `pending()` lists the seats that must act now,
// `legal_actions(seat)` their options, `step(seat, action)` applies one. After a draw
// only the drawing seat acts; after a discard (or a kakan/ankan that can be robbed)
// every seat with a claim acts once, then claims resolve by priority (ron > pon/kan >
// chi). Every hand's wall comes from wall.hpp's key (session seed, game, kyoku, honba).
// The engine records an MJAI event stream and, for every win, the exact scoring input
// and the score change it applied (for outside re-scoring).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "score.hpp"
#include "tiles.hpp"

namespace meeple::mj {

struct GameRules {
  Rules scoring;                 // red fives, open tanyao, double yakuman, kazoe, kiriage
  bool east_only = false;        // false: East-South game
  int start_points = 25000;
  int return_points = 30000;     // game goes on into the next wind while nobody has this
  bool agari_yame = true;        // all-last dealer who wins or is tenpai while top ends the game
  bool bust_ends = true;         // a score below zero ends the game
  bool double_ron = true;        // else head-bump: only the first claimant after the discarder wins
  bool triple_ron_abort = true;  // three rons = abortive draw
  bool nagashi_mangan = true;
  bool pao = true;               // liability for big three dragons / big four winds
  bool kyuushu_kyuuhai = true, suufon_renda = true, suucha_riichi = true, suukaikan = true;
};

enum class ActionType : uint8_t { Discard, Riichi, Tsumo, Ron, Chi, Pon, Daiminkan, Ankan, Kakan, Kyuushu, Pass };
const char* action_type_name(ActionType t);

struct Action {
  ActionType type = ActionType::Pass;
  int tile = -1;                     // discard / called / kan tile (136 id); -1 if none
  std::array<int, 3> consumed{-1, -1, -1};  // own tiles used by chi/pon/daiminkan (136 ids)
  bool operator==(const Action& o) const { return type == o.type && tile == o.tile && consumed == o.consumed; }
  std::string to_string() const;
};

// What a win was scored from, and what the engine applied (for outside checks).
struct WinRecord {
  int winner = -1, loser = -1;  // loser -1 = tsumo
  WinInput input;
  ScoreResult result;
  std::array<int, 4> deltas{};
  int pao = -1;  // seat liable (pao) for this win, -1 none
};

enum class Phase : uint8_t { SelfTurn, Claims, GameOver };

class Game {
 public:
  explicit Game(GameRules rules = GameRules{});
  void reset(uint64_t session_seed, uint64_t game_index);
  // Replay: hands use these walls in order (then seeded ones again); see mjai.py.
  void reset_with_walls(std::vector<std::array<uint8_t, 136>> walls);

  const GameRules& rules() const { return rules_; }
  bool is_done() const { return phase_ == Phase::GameOver; }
  std::vector<int> pending() const;  // seats that must act now
  std::vector<Action> legal_actions(int seat) const;
  // Throws std::invalid_argument (seat, action, legal set) and leaves the state unchanged
  // when the action is not legal.
  void step(int seat, const Action& action);
  // Branching with re-deals (meeple_mahjong.branch): shuffle, with this seed, the tiles no seat
  // has seen (the live wall not yet drawn and what lies past its end, the undrawn rinshan tiles,
  // the unrevealed dora and every ura indicator) among their positions. Hands, melds, ponds and
  // everything shown stay as they are, so every seat's view is unchanged; a finished game is left
  // alone.
  void redeal_wall(uint64_t seed);

  // Observation hooks.
  const std::array<int, 4>& scores() const { return scores_; }
  std::vector<int> hand(int seat) const;
  const std::vector<Meld>& melds(int seat) const { return p_[seat].melds; }
  const std::vector<int>& discards(int seat) const { return p_[seat].discards; }
  bool in_riichi(int seat) const { return p_[seat].riichi; }
  std::vector<int> dora_indicators() const;
  int kyoku() const { return kyoku_; }
  int honba() const { return honba_; }
  int riichi_sticks() const { return sticks_; }
  int dealer() const { return kyoku_ % 4; }
  int tiles_left() const { return live_end() - draw_pos_; }
  int hands_played() const { return hands_played_; }
  const std::vector<std::string>& events() const { return events_; }
  const std::vector<WinRecord>& wins() const { return wins_; }
  void set_record_events(bool on) { record_ = on; }

  // Encoder hooks (docs/mahjong_encoding.md): read-only views of state the observation
  // encoders need and the accessors above do not give. All const and allocation-free.
  struct Player {
    std::vector<int> hand;  // concealed tiles, 136 ids
    std::vector<Meld> melds;
    std::vector<int> discards;
    std::vector<bool> discard_called;
    // Encoder records (read-only outside the engine): per discard, drawn-and-discarded
    // (tsumogiri) and the hand-wide discard number (0 = the hand's first discard), so
    // "discarded after X" questions need no event parsing; riichi_index = the pond index
    // of the riichi declaration tile (-1 none).
    std::vector<uint8_t> discard_tsumogiri;
    std::vector<uint8_t> discard_turn;
    int riichi_index = -1;
    bool riichi = false, double_riichi = false, ippatsu = false;
    bool temp_furiten = false, riichi_furiten = false;
    uint64_t kuikae = 0;          // kinds that may not be discarded right after a call
    int kans = 0;
    int pao_from = -1;            // seat that fed the third dragon / fourth wind set
    int pao_yaku = -1;            // kDaisangen or kDaisuushi
  };

  const Player& player(int seat) const { return p_[seat]; }
  Phase phase() const { return phase_; }
  int actor() const { return actor_; }  // SelfTurn: the seat to act
  // The tile drawn this turn (after a draw, -1 after a call or outside SelfTurn).
  int drawn_tile() const { return phase_ == Phase::SelfTurn && !after_call_ ? drawn_ : -1; }
  // Claims window: the offered tile (discard, kakan or ankan tile), its seat and kind
  // (0 discard, 1 kakan, 2 ankan); -1 outside a claims window.
  int claim_tile() const { return phase_ == Phase::Claims ? claim_tile_ : -1; }
  int claim_from() const { return phase_ == Phase::Claims ? claim_from_ : -1; }
  int claim_kind() const { return phase_ == Phase::Claims ? static_cast<int>(claim_kind_) : -1; }
  int turns() const { return turns_; }  // discards made this hand
  bool first_go_around() const { return first_uninterrupted(); }
  // The hand's wall (oracle): live draws wall[draw_pos() .. live_end()), rinshan
  // wall[122 + i] (i < kans_total() drawn), dora / ura indicators wall[126 + i] / wall[131 + i].
  const std::array<uint8_t, 136>& wall_tiles() const { return wall_; }
  int draw_pos() const { return draw_pos_; }
  int live_wall_end() const { return live_end(); }
  int kans_total() const { return kans_total_; }
  int dora_shown() const { return dora_shown_; }

 private:
  // Hand flow.
  void reset_impl(uint64_t session_seed, uint64_t game_index);
  void start_hand();
  void draw(bool rinshan);
  void do_discard(int seat, int tile, bool riichi);
  void open_claims();
  void resolve_claims();
  void after_discard_passes();
  void end_hand_win(const std::vector<int>& winners, int loser, int win_tile, bool chankan);
  void apply_pao(WinRecord& rec) const;
  void end_hand_draw(const char* reason, bool exhaustive);
  void next_hand(bool renchan, bool honba_up);
  void finish_game();
  void reveal_dora();      // a pending (open-kan) indicator
  void reveal_dora_now();  // one more indicator at once (closed kan)

  // Hand analysis.
  Counts concealed_counts(int seat) const;
  Counts visible_own_counts(int seat) const;  // concealed + melds
  uint64_t waits(int seat) const;              // bitmask of kinds that complete the hand (cached)
  static uint64_t waits_of(const std::vector<int>& hand, const std::vector<Meld>& melds);
  void touch(int seat) { waits_cache_[seat] = -1; }  // call whenever a seat's tiles change
  bool furiten(int seat) const;
  WinInput win_input(int seat, int win_tile, bool tsumo, bool chankan) const;
  ScoreResult try_score(int seat, int win_tile, bool tsumo, bool chankan) const;
  std::vector<Action> self_actions(int seat) const;
  std::vector<Action> claim_actions(int seat) const;
  bool discard_ok_after_call(const Player& pl, const std::vector<int>& removed, uint64_t forbid) const;
  int live_end() const { return 122 - kans_total_; }
  bool first_uninterrupted() const { return !any_call_ && turns_ < 4; }

  void emit(std::string ev) {
    if (record_) events_.push_back(std::move(ev));
  }
  std::string scores_json() const;
  std::string tile_json(int t) const;
  std::string tiles_json(std::vector<int> ts) const;

  GameRules rules_;
  uint64_t seed_ = 0, game_ = 0;
  std::array<uint8_t, 136> wall_{};
  std::array<Player, 4> p_;
  std::array<int, 4> scores_{};
  int kyoku_ = 0, honba_ = 0, sticks_ = 0, hands_played_ = 0;
  int draw_pos_ = 0, kans_total_ = 0, dora_shown_ = 0, pending_dora_ = 0;
  int kan_players_mask_ = 0;
  Phase phase_ = Phase::GameOver;
  int actor_ = 0;             // SelfTurn: seat to act
  int drawn_ = -1;            // tile drawn this turn (-1 after a call)
  bool rinshan_turn_ = false;
  bool after_call_ = false;
  bool any_call_ = false;     // any chi/pon/kan this hand (ends the first go-around)
  int turns_ = 0;             // discards made this hand
  int riichi_declared_ = 0;   // riichi accepted this hand
  int riichi_pending_seat_ = -1;
  // Claims window.
  int claim_tile_ = -1, claim_from_ = -1;
  enum class ClaimKind : uint8_t { Discard, Kakan, Ankan } claim_kind_ = ClaimKind::Discard;
  std::array<std::vector<Action>, 4> claim_options_;
  std::array<bool, 4> claim_done_{};
  std::array<Action, 4> claim_choice_{};
  int kan_actor_after_claims_ = -1;  // kakan/ankan declarer, continues with rinshan if nobody robs
  std::vector<std::array<uint8_t, 136>> forced_walls_;
  size_t forced_next_ = 0;
  mutable std::array<int64_t, 4> waits_cache_{-1, -1, -1, -1};
  bool record_ = true;
  std::vector<std::string> events_;
  std::vector<WinRecord> wins_;
};

}  // namespace meeple::mj
