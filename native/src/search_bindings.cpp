// Python bindings of Connect Four search and self-play: the generic MCTS and
// SelfPlay bindings (search_bind.hpp) on mcts::Tree / SelfPlayEngine<Connect4>
// -> meeple_native.MCTS and .SelfPlay. Here: what Connect Four names its own
// (moves as column digits) and its defaults and docstrings.
#include <nanobind/nanobind.h>

#include <string>

#include "connect4.hpp"
#include "search_bind.hpp"

namespace meeple::search_bind {

template <>
struct BindSpec<c4::Connect4> {
  static constexpr const char* kStateArg = "position";
  static constexpr const char* kMctsDoc =
      "PUCT Monte Carlo tree search on one Connect Four position (analysis, tests, play). "
      "The evaluator is None/'uniform' (uniform priors, value 0), 'rollout' (uniform priors, "
      "value of one random playout) or a callable (planes (B, 3, 6, 7) float32, legal (B, 7) bool) "
      "-> (policy (B, 7), value (B,)), values from the side to move's view.";
  static constexpr const char* kSearchDoc =
      "Search `position` with num_simulations simulations. Returns a dict: visits (7,) int64, q (7,) "
      "(mover's view, NaN if unvisited or illegal), prior (7,), root_visits (= simulations + 1), root_value, "
      "simulations, nodes, virtual_loss (sum of the counters; 0 after a search), collisions, evaluations, "
      "evaluator_calls, best_move, policy_target (what self-play records: the visit distribution, or with "
      "gumbel=True softmax(logit + sigma(completed Q))).";
  static constexpr const char* kSelfPlayDoc =
      "Self-play games with W worker threads (G games each, up to L leaves in flight per game) "
      "and one batched evaluation queue. run(num_games) evaluates batches on the calling thread; "
      "see native/README.md.";
  static constexpr const char* kRunDoc =
      "Play num_games complete games; returns a dict of samples (planes, policy, value, legal, game, ply), "
      "per-game moves/winner/game_id, and metrics. Raises what the evaluator raised.";
  static constexpr float kMctsDirichletAlpha = 1.0f;
  static constexpr float kSelfPlayDirichletAlpha = 1.0f;
  static constexpr int kTemperatureMoves = 8;
  static constexpr int kCacheSize = 1 << 16;

  static void add_best(nb::dict& d, const mc::Tree<c4::Connect4>&, int best) { d["best_move"] = best; }

  // A game's moves as one string of columns '1'..'7'.
  static void add_games(nb::dict& d, const mc::RunResult<c4::Connect4>& res) {
    nb::list moves;
    for (const auto& g : res.games) {
      std::string s;
      for (int action : g.moves) s += static_cast<char>('1' + action);
      moves.append(nb::str(s.c_str()));
    }
    d["moves"] = moves;
  }
};

}  // namespace meeple::search_bind

void bind_search(nanobind::module_& m) { meeple::search_bind::def_search<meeple::c4::Connect4>(m); }
