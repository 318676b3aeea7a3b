// Python binding of one chess search tree: mcts::Tree<chess::Game> ->
// meeple_native.chess.MCTS (analysis, play, and a fixed opponent for evaluation:
// pure MCTS with random playouts).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cmath>
#include <string>
#include <vector>

#include "chess/bind_parts.hpp"
#include "chess/game.hpp"
#include "chess/traits.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace mc = meeple::mcts;

namespace meeple::chess {
namespace {

constexpr std::size_t A = kNumActions;
constexpr std::size_t kObs = static_cast<std::size_t>(kNumPlanes) * 64;

enum class Builtin { kCallable, kUniform, kRollout };

struct PyMCTS {
  mc::SearchParams params;
  int leaves_in_flight;
  bool logits;
  mc::Rng rng;
  mc::Tree<Game> tree;
  bool searched = false;

  PyMCTS(const mc::SearchParams& p, int L, bool lg, std::uint64_t seed)
      : params(p), leaves_in_flight(L), logits(lg), rng(seed), tree(p) {}

  nb::dict search(const Game& pos, nb::handle evaluator) {
    if (pos.is_terminal()) throw nb::value_error("MCTS.search: the game is over in this position");
    Builtin kind = Builtin::kCallable;
    if (evaluator.is_none()) {
      kind = Builtin::kUniform;
    } else if (nb::isinstance<nb::str>(evaluator)) {
      const auto s = nb::cast<std::string>(evaluator);
      if (s == "uniform") kind = Builtin::kUniform;
      else if (s == "rollout") kind = Builtin::kRollout;
      else throw nb::value_error(("evaluator must be a callable, None, 'uniform' or 'rollout', got '" + s + "'").c_str());
    } else if (!PyCallable_Check(evaluator.ptr())) {
      throw nb::type_error("evaluator must be a callable, None, 'uniform' or 'rollout'");
    }
    tree.set_params(params);
    tree.reset(pos);
    std::vector<mc::Tree<Game>::Leaf> pending;
    auto loop = [&](auto&& evaluate_pending) {
      while (!tree.done()) {
        pending.clear();
        while (tree.wants_more() && tree.in_flight() < leaves_in_flight) {
          auto leaf = tree.select();
          if (leaf.kind == mc::Tree<Game>::LeafKind::kCollision) break;
          if (leaf.kind == mc::Tree<Game>::LeafKind::kNeedsEval) pending.push_back(leaf);
        }
        if (!pending.empty()) evaluate_pending();
      }
    };
    if (kind != Builtin::kCallable) {
      nb::gil_scoped_release release;
      loop([&] {
        float uniform[MoveList::kCapacity];
        int legal[MoveList::kCapacity];
        for (auto& leaf : pending) {
          const int n = leaf.state.legal_moves(legal);
          for (int i = 0; i < n; ++i) uniform[i] = 1.0f / static_cast<float>(n);
          const float v = kind == Builtin::kRollout ? mc::Tree<Game>::rollout(leaf.state, rng) : 0.0f;
          tree.expand(leaf.node, leaf.state, uniform, v, &rng);
        }
      });
    } else {
      loop([&] {
        const std::size_t n = pending.size();
        std::vector<float> planes(n * kObs), policy(n * A), value(n);
        auto* legal = new std::vector<std::uint8_t>(n * A, 0);
        for (std::size_t i = 0; i < n; ++i) {
          pending[i].state.encode(planes.data() + i * kObs);
          int acts[MoveList::kCapacity];
          const int k = pending[i].state.legal_moves(acts);
          for (int j = 0; j < k; ++j) (*legal)[i * A + acts[j]] = 1;
        }
        nb::capsule owner(legal, [](void* q) noexcept { delete static_cast<std::vector<std::uint8_t>*>(q); });
        nb::ndarray<nb::numpy, bool> legal_arr(reinterpret_cast<bool*>(legal->data()), {n, A}, owner);
        auto planes_arr = bind::to_numpy(std::move(planes), {n, static_cast<std::size_t>(kNumPlanes), 8, 8});
        bind::call_evaluator(evaluator, nb::cast(planes_arr), nb::cast(legal_arr), n, policy.data(), value.data());
        for (std::size_t i = 0; i < n; ++i) {
          const float v = std::max(-1.0f, std::min(1.0f, value[i]));
          tree.expand_raw(pending[i].node, pending[i].state, policy.data() + i * A, logits, v, &rng);
        }
      });
    }
    searched = true;
    return result();
  }

  nb::dict result() const {
    const mc::Node& r = tree.root();
    std::vector<std::int64_t> visits(A, 0);
    std::vector<float> q(A, NAN);
    for (int i = 0; i < r.num_children; ++i) {
      const mc::Node& c = tree.node(r.first_child + i);
      visits[c.action] = c.n;
      if (c.n > 0) q[c.action] = c.w / static_cast<float>(c.n);
    }
    mc::Rng tmp(0);
    const int best = tree.choose_action(0.0f, tmp);
    Move mv;
    action_to_move(best, tree.root_state().position(), mv);
    nb::dict d;
    d["visits"] = bind::to_numpy(std::move(visits), {A});
    d["q"] = bind::to_numpy(std::move(q), {A});
    d["root_value"] = r.n > 0 ? -r.w / static_cast<float>(r.n) : 0.0f;
    d["simulations"] = r.n - 1;
    d["nodes"] = tree.size();
    d["best_action"] = best;
    d["best_move"] = Position::to_uci(mv);
    return d;
  }
};

}  // namespace

void bind_mcts(nb::module_& m) {
  nb::class_<PyMCTS>(m, "MCTS",
                     "PUCT search on one chess position. evaluator: None/'uniform' (uniform priors, value 0), "
                     "'rollout' (uniform priors, value of one random playout to the end of the game, C++) or a "
                     "callable (planes (B, 119, 8, 8), legal (B, 4672)) -> (policy (B, 4672), value (B,)).")
      .def(
          "__init__",
          [](PyMCTS* self, int num_simulations, float c_puct, float dirichlet_alpha, float dirichlet_epsilon,
             int leaves_in_flight, const std::string& policy, std::uint64_t seed) {
            if (num_simulations < 1) throw nb::value_error("num_simulations must be >= 1");
            if (leaves_in_flight < 1) throw nb::value_error("leaves_in_flight must be >= 1");
            if (policy != "logits" && policy != "priors")
              throw nb::value_error(("policy must be 'logits' or 'priors', got '" + policy + "'").c_str());
            mc::SearchParams p;
            p.num_simulations = num_simulations;
            p.c_puct = c_puct;
            p.dirichlet_alpha = dirichlet_alpha;
            p.dirichlet_epsilon = dirichlet_epsilon;
            new (self) PyMCTS(p, leaves_in_flight, policy == "logits", seed);
          },
          nb::kw_only(), "num_simulations"_a = 800, "c_puct"_a = 1.5f, "dirichlet_alpha"_a = 0.3f,
          "dirichlet_epsilon"_a = 0.0f, "leaves_in_flight"_a = 1, "policy"_a = "logits", "seed"_a = 0)
      .def("search", &PyMCTS::search, "board"_a, "evaluator"_a.none() = nb::none(),
           "Search `board`; returns visits (4672,) int64, q (4672,) (mover's view, NaN unvisited), root_value, "
           "simulations, nodes, best_action, best_move (UCI). The built-in evaluators release the GIL.")
      .def(
          "choose_action",
          [](PyMCTS& s, float temperature) {
            if (!s.searched) throw nb::value_error("MCTS.choose_action: call search() first");
            return s.tree.choose_action(temperature, s.rng);
          },
          "temperature"_a = 0.0f, "Action from the last search: ~ visits^(1/T), or the most visited for T = 0.");
}

}  // namespace meeple::chess
