// Python binding of chess search and self-play: the generic MCTS and SelfPlay
// bindings (search_bind.hpp) on mcts::Tree / SelfPlayEngine<chess::Game> ->
// meeple_native.chess.MCTS and .SelfPlay. Here: what chess names its own
// (UCI moves, how a game ended) and its defaults and docstrings.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstddef>

#include "chess/game.hpp"
#include "chess/traits.hpp"
#include "search_bind.hpp"

namespace meeple::search_bind {

template <>
struct BindSpec<chess::Game> {
  static constexpr const char* kStateArg = "board";
  static constexpr const char* kMctsDoc =
      "PUCT search on one chess position. evaluator: None/'uniform' (uniform priors, value 0), "
      "'rollout' (uniform priors, value of one random playout to the end of the game, C++) or a "
      "callable (planes (B, 119, 8, 8), legal (B, 4672)) -> (policy (B, 4672), value (B,)).";
  static constexpr const char* kSearchDoc =
      "Search `board`; returns visits (4672,) int64, q (4672,) (mover's view, NaN unvisited), prior, "
      "policy_target, root_visits, root_value, simulations, nodes, virtual_loss, collisions, evaluations, "
      "evaluator_calls, best_action, best_move (UCI). The built-in evaluators release the GIL.";
  static constexpr const char* kSelfPlayDoc =
      "Chess self-play on the generic engine (worker threads, batched evaluation queue); "
      "the parameters mean what they mean for meeple_native.SelfPlay (native/README.md).";
  static constexpr const char* kRunDoc =
      "Play num_games games from the initial position; returns samples (planes (N, 119, 8, 8), policy "
      "(N, 4672), value (N,), legal (N, 4672), game, ply), per game moves (UCI lists), termination, "
      "winner (0 white, 1 black, -1 draw), game_id, and metrics.";
  static constexpr float kMctsDirichletAlpha = 0.3f;
  static constexpr float kSelfPlayDirichletAlpha = 0.3f;
  static constexpr int kTemperatureMoves = 30;
  static constexpr int kCacheSize = 1 << 12;

  static void add_best(nb::dict& d, const mc::Tree<chess::Game>& tree, int best) {
    chess::Move mv;
    chess::action_to_move(best, tree.root_state().position(), mv);
    d["best_action"] = best;
    d["best_move"] = chess::Position::to_uci(mv);
  }

  // Replays each game to name its moves (UCI) and the way it ended.
  static void add_games(nb::dict& d, const mc::RunResult<chess::Game>& res) {
    nb::list moves, terminations;
    for (const auto& g : res.games) {
      chess::Game replay;
      nb::list uci;
      for (int action : g.moves) {
        chess::Move mv;
        chess::action_to_move(action, replay.position(), mv);
        uci.append(nb::str(chess::Position::to_uci(mv).c_str()));
        replay.play_move(mv);
      }
      moves.append(uci);
      terminations.append(nb::str(chess::termination_name(replay.termination())));
    }
    d["moves"] = moves;
    d["termination"] = terminations;
  }
};

}  // namespace meeple::search_bind

namespace meeple::chess {

void bind_search(nanobind::module_& m) { search_bind::def_search<Game>(m); }

}  // namespace meeple::chess
