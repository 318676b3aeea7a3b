// Python bindings of the generic search, written once for every game G with
// mcts::GameTraits<G>: MCTS (one tree: analysis, play, a fixed opponent) and
// SelfPlay (worker threads and one batched evaluation queue, native/README.md).
// A game's binding file specialises BindSpec<G> (what differs between games:
// the state's argument name, defaults, docstrings, how a move is named) and
// calls def_search<G>(module).
//
// The evaluator gets planes (B, planes, height, width) float32 and legal
// (B, actions) bool and returns (policy (B, actions), value (B,)), values from
// the side to move's view; None / "uniform" (and for MCTS "rollout") are C++.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mcts.hpp"
#include "selfplay.hpp"

namespace meeple::search_bind {

namespace nb = nanobind;
namespace mc = meeple::mcts;
using namespace nb::literals;

// Specialised per game, with:
//   static constexpr const char* kStateArg;         // MCTS.search's first argument
//   static constexpr const char *kMctsDoc, *kSearchDoc, *kSelfPlayDoc, *kRunDoc;
//   static constexpr float kMctsDirichletAlpha, kSelfPlayDirichletAlpha;
//   static constexpr int kTemperatureMoves, kCacheSize;  // SelfPlay's defaults
//   static void add_best(nb::dict&, const mc::Tree<G>&, int best);  // MCTS result's best move
//   static void add_games(nb::dict&, const mc::RunResult<G>&);       // SelfPlay run's per-game moves
template <class G>
struct BindSpec;

template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::initializer_list<std::size_t> shape) {
  auto* p = new std::vector<T>(std::move(v));
  nb::capsule owner(p, [](void* q) noexcept { delete static_cast<std::vector<T>*>(q); });
  return nb::ndarray<nb::numpy, T>(p->data(), shape, owner);
}

// A 0/1 byte vector as a numpy bool array that owns it (no copy).
inline nb::ndarray<nb::numpy, bool> bool_array(std::vector<std::uint8_t>&& v,
                                               std::initializer_list<std::size_t> shape) {
  auto* p = new std::vector<std::uint8_t>(std::move(v));
  nb::capsule owner(p, [](void* q) noexcept { delete static_cast<std::vector<std::uint8_t>*>(q); });
  return nb::ndarray<nb::numpy, bool>(reinterpret_cast<bool*>(p->data()), shape, owner);
}

// SelfPlay.next_game_id: read, and set between runs to resume a run's games exactly.
template <class Class>
void def_next_game_id(Class& cls) {
  using Py = typename Class::Type;
  cls.def_prop_rw(
      "next_game_id", [](const Py& s) { return s.engine->next_game_id(); },
      [](Py& s, std::uint64_t id) {
        try {
          s.engine->set_next_game_id(id);
        } catch (const std::runtime_error& e) {
          throw nb::value_error(e.what());
        }
      },
      "Id of the next game (its random stream derives from seed and id); set it to resume a run exactly.");
}

inline std::string shape_str(const nb::ndarray<>& a) {
  std::string s = "(";
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    s += std::to_string(a.shape(i));
    if (a.ndim() == 1) s += ",";
    else if (i + 1 < a.ndim()) s += ", ";
  }
  return s + ")";
}

// Any array-like -> C-contiguous float32 CPU ndarray (zero copy when possible).
inline nb::ndarray<const float, nb::c_contig, nb::device::cpu> as_f32(nb::handle obj, const char* what) {
  nb::ndarray<const float, nb::c_contig, nb::device::cpu> out;
  if (nb::try_cast(obj, out, false)) return out;
  nb::object np = nb::module_::import_("numpy");
  nb::object conv;
  try {
    conv = np.attr("ascontiguousarray")(obj, "dtype"_a = np.attr("float32"));
  } catch (nb::python_error& e) {
    throw nb::type_error((std::string("evaluator returned a ") + what + " that is not convertible to a float32 "
                          "array (" + nb::type_name(obj.type()).c_str() + "): " + e.what())
                             .c_str());
  }
  if (!nb::try_cast(conv, out, false)) throw nb::type_error((std::string("evaluator ") + what + ": not an array").c_str());
  return out;
}

// Calls the Python evaluator on rows [0, n) of planes and legal; writes policy
// (n, actions) and value (n,) into the given outputs.
inline void call_evaluator(nb::handle evaluator, nb::handle planes, nb::handle legal, std::size_t n,
                           std::size_t actions, float* policy_out, float* value_out) {
  const std::string a = std::to_string(actions);
  nb::object out = evaluator(planes, legal);
  nb::tuple t;
  if (!nb::try_cast(out, t) || t.size() != 2) {
    throw nb::type_error(("evaluator must return a tuple (policy, value) with policy of shape (B, " + a +
                          ") and value of shape (B,), got " + nb::type_name(out.type()).c_str())
                             .c_str());
  }
  auto pol = as_f32(t[0], "policy");
  auto val = as_f32(t[1], "value");
  if (pol.ndim() != 2 || pol.shape(0) != n || pol.shape(1) != actions) {
    throw nb::value_error(("evaluator policy must have shape (" + std::to_string(n) + ", " + a + "), got " +
                           shape_str(nb::ndarray<>(pol.handle())))
                              .c_str());
  }
  const bool val_ok = (val.ndim() == 1 && val.shape(0) == n) || (val.ndim() == 2 && val.shape(0) == n && val.shape(1) == 1);
  if (!val_ok) {
    throw nb::value_error((std::string("evaluator value must have shape (") + std::to_string(n) + ",), got " +
                           shape_str(nb::ndarray<>(val.handle())))
                              .c_str());
  }
  const float* v = val.data();
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      throw nb::value_error(("evaluator value[" + std::to_string(i) + "] is not finite (" + std::to_string(v[i]) + ")").c_str());
    }
  }
  std::memcpy(policy_out, pol.data(), sizeof(float) * n * actions);
  std::memcpy(value_out, v, sizeof(float) * n);
}

inline bool parse_policy_kind(const std::string& s) {
  if (s == "logits") return true;
  if (s == "priors") return false;
  throw nb::value_error(("policy must be 'logits' or 'priors', got '" + s + "'").c_str());
}

enum class Builtin { kNone, kUniform, kRollout };

// evaluator: None / 'uniform' / 'rollout' (built in, C++) or a callable.
inline Builtin parse_evaluator(nb::handle ev, bool allow_rollout) {
  if (ev.is_none()) return Builtin::kUniform;
  if (nb::isinstance<nb::str>(ev)) {
    const std::string s = nb::cast<std::string>(ev);
    if (s == "uniform") return Builtin::kUniform;
    if (s == "rollout" && allow_rollout) return Builtin::kRollout;
    throw nb::value_error(("evaluator must be a callable, None or " + std::string(allow_rollout ? "'uniform'/'rollout'" : "'uniform'") +
                           ", got '" + s + "'").c_str());
  }
  if (!PyCallable_Check(ev.ptr()))
    throw nb::type_error((std::string("evaluator must be callable, got ") + nb::type_name(ev.type()).c_str()).c_str());
  return Builtin::kNone;
}

inline mc::SearchParams make_params(int num_simulations, float c_puct, float dirichlet_alpha, float dirichlet_epsilon,
                                    float virtual_loss, float fpu_value) {
  mc::SearchParams p;
  p.num_simulations = num_simulations;
  p.c_puct = c_puct;
  p.dirichlet_alpha = dirichlet_alpha;
  p.dirichlet_epsilon = dirichlet_epsilon;
  p.virtual_loss = virtual_loss;
  p.fpu_value = fpu_value;
  return p;
}

// Sizes of game G as numpy shapes.
template <class G>
struct Shapes {
  using T = mc::GameTraits<G>;
  static constexpr std::size_t A = T::kNumActions;
  static constexpr std::size_t P = T::kNumPlanes, H = T::kObsHeight, W = T::kObsWidth;
  static constexpr std::size_t kObs = T::kObsSize;
};

// ------------------------------------------------------------------ MCTS
template <class G>
struct PyMCTS {
  using S = Shapes<G>;
  using Tree = mc::Tree<G>;
  mc::SearchParams params;
  int leaves_in_flight;
  bool logits;
  mc::Rng rng;
  Tree tree;
  bool searched = false;
  long collisions = 0, evaluations = 0, evaluator_calls = 0;

  PyMCTS(const mc::SearchParams& p, int L, bool lg, std::uint64_t seed)
      : params(p), leaves_in_flight(L), logits(lg), rng(seed), tree(p) {}

  nb::dict search(const G& pos, nb::handle evaluator) {
    if (pos.is_terminal()) throw nb::value_error("MCTS.search: the game is over in this position");
    const Builtin builtin = parse_evaluator(evaluator, true);
    collisions = evaluations = evaluator_calls = 0;
    tree.set_params(params);
    tree.reset(pos);
    std::vector<typename Tree::Leaf> pending;
    std::vector<float> planes, policy, value;
    std::vector<std::uint8_t> legal;
    auto loop = [&](auto&& evaluate_pending) {
      while (!tree.done()) {
        pending.clear();
        while (tree.wants_more() && tree.in_flight() < leaves_in_flight) {
          auto leaf = tree.select();
          if (leaf.kind == Tree::LeafKind::kCollision) {
            ++collisions;
            break;
          }
          if (leaf.kind == Tree::LeafKind::kNeedsEval) pending.push_back(leaf);
        }
        if (!pending.empty()) {
          evaluations += static_cast<long>(pending.size());
          ++evaluator_calls;
          evaluate_pending();
        }
      }
    };
    constexpr int kMaxLegal = mc::GameTraits<G>::kMaxLegal;
    if (builtin != Builtin::kNone) {
      nb::gil_scoped_release release;
      loop([&] {
        float uniform[kMaxLegal];
        int lg[kMaxLegal];
        for (auto& leaf : pending) {
          const int n = leaf.state.legal_moves(lg);
          for (int i = 0; i < n; ++i) uniform[i] = 1.0f / static_cast<float>(n);
          const float v = builtin == Builtin::kRollout ? Tree::rollout(leaf.state, rng) : 0.0f;
          tree.expand(leaf.node, leaf.state, uniform, v, &rng);
        }
      });
    } else {
      loop([&] {
        const std::size_t n = pending.size();
        planes.assign(n * S::kObs, 0.0f);
        legal.assign(n * S::A, 0);
        policy.assign(n * S::A, 0.0f);
        value.assign(n, 0.0f);
        int lg[kMaxLegal];
        for (std::size_t i = 0; i < n; ++i) {
          pending[i].state.encode(planes.data() + i * S::kObs);
          const int k = pending[i].state.legal_moves(lg);
          for (int j = 0; j < k; ++j) legal[i * S::A + lg[j]] = 1;
        }
        // Fresh arrays per call: the evaluator may keep them.
        auto planes_arr = to_numpy(std::vector<float>(planes), {n, S::P, S::H, S::W});
        auto legal_arr = bool_array(std::vector<std::uint8_t>(legal), {n, S::A});
        call_evaluator(evaluator, nb::cast(planes_arr), nb::cast(legal_arr), n, S::A, policy.data(), value.data());
        for (std::size_t i = 0; i < n; ++i) {
          const float v = std::max(-1.0f, std::min(1.0f, value[i]));
          tree.expand_raw(pending[i].node, pending[i].state, policy.data() + i * S::A, logits, v, &rng);
        }
      });
    }
    searched = true;
    return result();
  }

  nb::dict result() const {
    const mc::Node& r = tree.root();
    std::vector<std::int64_t> visits(S::A, 0);
    std::vector<float> q(S::A, NAN), prior(S::A, 0.0f);
    for (int i = 0; i < r.num_children; ++i) {
      const mc::Node& c = tree.node(r.first_child + i);
      visits[c.action] = c.n;
      prior[c.action] = c.prior;
      if (c.n > 0) q[c.action] = c.w / static_cast<float>(c.n);
    }
    nb::dict d;
    d["visits"] = to_numpy(std::move(visits), {S::A});
    d["q"] = to_numpy(std::move(q), {S::A});
    d["prior"] = to_numpy(std::move(prior), {S::A});
    std::vector<float> target(S::A, 0.0f);
    tree.policy_target(target.data());
    d["policy_target"] = to_numpy(std::move(target), {S::A});
    d["root_visits"] = r.n;
    d["root_value"] = r.n > 0 ? -r.w / static_cast<float>(r.n) : 0.0f;
    d["simulations"] = r.n - 1;
    d["nodes"] = tree.size();
    d["virtual_loss"] = tree.virtual_loss_total();
    d["collisions"] = collisions;
    d["evaluations"] = evaluations;
    d["evaluator_calls"] = evaluator_calls;
    mc::Rng tmp(0);
    BindSpec<G>::add_best(d, tree, tree.choose_action(0.0f, tmp));
    return d;
  }

  int choose(float temperature) {
    if (!searched) throw nb::value_error("MCTS.choose_action: call search() first");
    return tree.choose_action(temperature, rng);
  }
};

// ------------------------------------------------------------------ SelfPlay
template <class G>
struct PySelfPlay {
  using S = Shapes<G>;
  using Engine = mc::SelfPlayEngine<G>;
  std::unique_ptr<Engine> engine;
  nb::object evaluator;
  Builtin builtin = Builtin::kNone;
  nb::object buffers[2];  // caller-provided planes buffers (optional)
  nb::dict last_metrics;
  std::atomic<bool> closed{false};
  std::mutex run_mu;  // in_run is guarded by it; close() waits on run_cv
  std::condition_variable run_cv;
  bool in_run = false;
  std::thread::id run_thread;

  nb::dict run(int num_games) {
    if (closed.load()) throw std::runtime_error("SelfPlay is closed");
    {
      std::lock_guard<std::mutex> lk(run_mu);
      if (in_run) throw std::runtime_error("SelfPlay.run() is already running (one run at a time)");
      in_run = true;
      run_thread = std::this_thread::get_id();
    }
    struct Done {
      PySelfPlay& s;
      ~Done() {
        {
          std::lock_guard<std::mutex> lk(s.run_mu);
          s.in_run = false;
        }
        s.run_cv.notify_all();
      }
    } done{*this};

    nb::handle self_py = nb::find(this);
    typename Engine::EvalFn fn;
    if (builtin == Builtin::kUniform) {
      fn = [](const mc::BatchView& v) {
        std::fill(v.policy_out, v.policy_out + static_cast<std::size_t>(v.n) * S::A, 0.0f);
        std::fill(v.value_out, v.value_out + v.n, 0.0f);
      };
    } else {
      fn = [this, self_py](const mc::BatchView& v) {
        nb::gil_scoped_acquire acquire;
        const auto n = static_cast<std::size_t>(v.n);
        nb::object planes;
        if (buffers[v.buffer_index].is_valid()) {
          planes = buffers[v.buffer_index][nb::slice(Py_ssize_t{0}, static_cast<Py_ssize_t>(n), Py_ssize_t{1})];
        } else {
          planes = nb::cast(nb::ndarray<nb::numpy, const float>(v.planes, {n, S::P, S::H, S::W}, self_py));
        }
        nb::object legal =
            nb::cast(nb::ndarray<nb::numpy, const bool>(reinterpret_cast<const bool*>(v.legal), {n, S::A}, self_py));
        call_evaluator(evaluator, planes, legal, n, S::A, v.policy_out, v.value_out);
      };
    }
    auto poll = [] {
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    };
    mc::RunResult<G> res;
    {
      nb::gil_scoped_release release;
      res = engine->run(num_games, fn, poll);
    }
    return to_dict(res);
  }

  nb::dict to_dict(mc::RunResult<G>& res) {
    std::size_t total = 0;
    for (auto& g : res.games) total += g.moves.size();
    std::vector<float> planes, policy, value;
    std::vector<std::uint8_t> legal, full;
    std::vector<std::int64_t> game(total), game_id(res.games.size());
    std::vector<std::int32_t> ply(total);
    std::vector<std::int8_t> winner(res.games.size());
    planes.reserve(total * S::kObs);
    policy.reserve(total * S::A);
    value.reserve(total);
    legal.reserve(total * S::A);
    std::size_t k = 0;
    for (std::size_t gi = 0; gi < res.games.size(); ++gi) {
      auto& g = res.games[gi];
      planes.insert(planes.end(), g.planes.begin(), g.planes.end());
      policy.insert(policy.end(), g.policy.begin(), g.policy.end());
      value.insert(value.end(), g.value.begin(), g.value.end());
      legal.insert(legal.end(), g.legal.begin(), g.legal.end());
      full.insert(full.end(), g.full.begin(), g.full.end());
      for (std::size_t i = 0; i < g.moves.size(); ++i, ++k) {
        game[k] = static_cast<std::int64_t>(gi);
        ply[k] = static_cast<std::int32_t>(i);
      }
      game_id[gi] = static_cast<std::int64_t>(g.game_id);
      winner[gi] = static_cast<std::int8_t>(g.winner);
    }
    nb::dict d;
    d["planes"] = to_numpy(std::move(planes), {total, S::P, S::H, S::W});
    d["policy"] = to_numpy(std::move(policy), {total, S::A});
    d["value"] = to_numpy(std::move(value), {total});
    d["legal"] = bool_array(std::move(legal), {total, S::A});
    d["game"] = to_numpy(std::move(game), {total});
    d["ply"] = to_numpy(std::move(ply), {total});
    d["full"] = bool_array(std::move(full), {total});  // 1: a full search (policy target)
    const std::size_t ng = res.games.size();
    d["game_id"] = to_numpy(std::move(game_id), {ng});
    d["winner"] = to_numpy(std::move(winner), {ng});
    BindSpec<G>::add_games(d, res);
    last_metrics = metrics_dict(res.metrics);
    d["metrics"] = last_metrics;
    return d;
  }

  nb::dict metrics_dict(const mc::SelfPlayMetrics& m) const {
    const auto& c = engine->config();
    nb::dict d;
    const double wall = m.wall_s > 0 ? m.wall_s : 1e-9;
    d["wall_s"] = m.wall_s;
    d["games"] = m.games;
    d["positions"] = m.positions;
    d["simulations"] = m.simulations;
    d["evaluations"] = m.evaluations;
    d["batches"] = m.batches;
    d["simulations_per_s"] = static_cast<double>(m.simulations) / wall;
    d["positions_per_s"] = static_cast<double>(m.positions) / wall;
    d["games_per_h"] = static_cast<double>(m.games) / wall * 3600.0;
    double rows = 0;
    for (std::size_t i = 0; i < m.batch_size_hist.size(); ++i) rows += static_cast<double>(i * m.batch_size_hist[i]);
    const double mean = m.batches ? rows / static_cast<double>(m.batches) : 0.0;
    d["batch_size_hist"] = m.batch_size_hist;
    d["mean_batch_size"] = mean;
    d["mean_fill_ratio"] = mean / c.batch_size;
    d["queue_latency_p50_us"] = m.latency_p50_us;
    d["queue_latency_p99_us"] = m.latency_p99_us;
    d["evaluator_s"] = m.evaluator_s;
    d["evaluator_idle_fraction"] = std::max(0.0, 1.0 - m.evaluator_s / wall);
    d["evaluator_wait_fraction"] = std::min(1.0, m.evaluator_wait_s / wall);
    d["cache_lookups"] = m.cache_lookups;
    d["cache_hits"] = m.cache_hits;
    d["cache_hit_rate"] = m.cache_lookups ? static_cast<double>(m.cache_hits) / static_cast<double>(m.cache_lookups) : 0.0;
    d["collisions"] = m.collisions;
    d["terminal_leaves"] = m.terminal_leaves;
    d["stopped"] = m.stopped;
    d["num_workers"] = c.num_workers;
    d["games_per_worker"] = c.games_per_worker;
    d["leaves_per_game"] = c.leaves_per_game;
    d["batch_size"] = c.batch_size;
    return d;
  }

  // Stops a run going on in another thread and waits for it to return (from
  // inside the evaluator it only stops); later runs raise.
  void close() {
    closed.store(true);
    engine->stop();
    nb::gil_scoped_release release;
    std::unique_lock<std::mutex> lk(run_mu);
    if (in_run && run_thread == std::this_thread::get_id()) return;  // called from the evaluator
    run_cv.wait(lk, [&] { return !in_run; });
  }
};

// Garbage-collector support: a SelfPlay holds its evaluator, which often refers
// back to the SelfPlay (closures, module globals); without traverse/clear such
// cycles would never be freed.
template <class G>
int selfplay_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  auto* s = nb::inst_ptr<PySelfPlay<G>>(self);
  Py_VISIT(s->evaluator.ptr());
  Py_VISIT(s->buffers[0].ptr());
  Py_VISIT(s->buffers[1].ptr());
  Py_VISIT(s->last_metrics.ptr());
  return 0;
}

template <class G>
int selfplay_clear(PyObject* self) {
  auto* s = nb::inst_ptr<PySelfPlay<G>>(self);
  s->evaluator = nb::none();
  s->buffers[0] = nb::object();
  s->buffers[1] = nb::object();
  s->last_metrics = nb::dict();
  return 0;
}

// planes_buffers[index]: a writable C-contiguous float32 CPU array of shape
// (batch_size, planes, height, width); returns its data.
template <class G>
float* planes_buffer(nb::handle obj, int batch_size, int index) {
  using S = Shapes<G>;
  nb::ndarray<float, nb::c_contig, nb::device::cpu> a;
  const std::string want = "a writable C-contiguous float32 CPU array of shape (" + std::to_string(batch_size) + ", " +
                           std::to_string(S::P) + ", " + std::to_string(S::H) + ", " + std::to_string(S::W) + ")";
  if (!nb::try_cast(obj, a, false))
    throw nb::type_error(("planes_buffers[" + std::to_string(index) + "] must be " + want + ", got " +
                          nb::type_name(obj.type()).c_str()).c_str());
  if (a.ndim() != 4 || a.shape(0) != static_cast<std::size_t>(batch_size) || a.shape(1) != S::P ||
      a.shape(2) != S::H || a.shape(3) != S::W)
    throw nb::value_error(("planes_buffers[" + std::to_string(index) + "] must be " + want + ", got shape " +
                           shape_str(nb::ndarray<>(a.handle()))).c_str());
  return a.data();
}

// Defines `MCTS` and `SelfPlay` of game G in module m.
template <class G>
void def_search(nb::module_& m) {
  using Spec = BindSpec<G>;
  using Mcts = PyMCTS<G>;
  using Sp = PySelfPlay<G>;
  using Engine = mc::SelfPlayEngine<G>;

  nb::class_<Mcts>(m, "MCTS", Spec::kMctsDoc)
      .def("__init__",
           [](Mcts* self, int num_simulations, float c_puct, float dirichlet_alpha, float dirichlet_epsilon,
              float virtual_loss, float fpu_value, int leaves_in_flight, const std::string& policy,
              std::uint64_t seed, bool gumbel, int gumbel_considered, float gumbel_c_visit, float gumbel_c_scale,
              float discount) {
             mc::SelfPlayConfig cfg;
             cfg.search = make_params(num_simulations, c_puct, dirichlet_alpha, dirichlet_epsilon, virtual_loss, fpu_value);
             mc::set_search_options(cfg, gumbel, gumbel_considered, gumbel_c_visit, gumbel_c_scale, discount, 0, 1.0f);
             cfg.leaves_per_game = leaves_in_flight;
             try {
               Engine::validate(cfg);
             } catch (const std::invalid_argument& e) {
               throw nb::value_error(e.what());
             }
             new (self) Mcts(cfg.search, leaves_in_flight, parse_policy_kind(policy), seed);
           },
           nb::kw_only(), "num_simulations"_a = 800, "c_puct"_a = 1.5f, "dirichlet_alpha"_a = Spec::kMctsDirichletAlpha,
           "dirichlet_epsilon"_a = 0.0f, "virtual_loss"_a = 1.0f, "fpu_value"_a = 0.0f, "leaves_in_flight"_a = 1,
           "policy"_a = "logits", "seed"_a = 0, "gumbel"_a = false, "gumbel_considered"_a = 16,
           "gumbel_c_visit"_a = 50.0f, "gumbel_c_scale"_a = 1.0f, "discount"_a = 1.0f)
      .def("search", &Mcts::search, nb::arg(Spec::kStateArg), "evaluator"_a.none() = nb::none(), Spec::kSearchDoc)
      .def("choose_action", &Mcts::choose, "temperature"_a = 0.0f,
           "Move from the last search: sampled ~ visits^(1/temperature), or the most visited if temperature is 0.")
      .def_prop_ro("virtual_loss_total", [](const Mcts& s) { return s.tree.virtual_loss_total(); })
      .def_prop_ro("tree_size", [](const Mcts& s) { return s.tree.size(); });

  static PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(selfplay_traverse<G>)},
                                {Py_tp_clear, reinterpret_cast<void*>(selfplay_clear<G>)},
                                {0, nullptr}};
  auto selfplay = nb::class_<Sp>(m, "SelfPlay", nb::type_slots(slots), Spec::kSelfPlayDoc)
      .def("__init__",
           [](Sp* self, nb::object evaluator, int num_simulations, int num_workers, int games_per_worker,
              int leaves_per_game, int batch_size, std::int64_t timeout_us, bool flush_when_idle, int spin_us,
              float c_puct, float dirichlet_alpha, float dirichlet_epsilon, float virtual_loss, float fpu_value,
              float temperature, int temperature_moves, const std::string& policy, int cache_size,
              std::uint64_t seed, nb::object planes_buffers, bool gumbel, int gumbel_considered,
              float gumbel_c_visit, float gumbel_c_scale, float discount, int fast_simulations,
              float full_search_prob) {
             mc::SelfPlayConfig cfg;
             cfg.search = make_params(num_simulations, c_puct, dirichlet_alpha, dirichlet_epsilon, virtual_loss, fpu_value);
             mc::set_search_options(cfg, gumbel, gumbel_considered, gumbel_c_visit, gumbel_c_scale, discount,
                                    fast_simulations, full_search_prob);
             cfg.num_workers = num_workers;
             cfg.games_per_worker = games_per_worker;
             cfg.leaves_per_game = leaves_per_game;
             cfg.batch_size = batch_size;
             cfg.timeout_us = timeout_us;
             cfg.flush_when_idle = flush_when_idle;
             cfg.spin_us = spin_us;
             cfg.temperature = temperature;
             cfg.temperature_moves = temperature_moves;
             cfg.policy_logits = parse_policy_kind(policy);
             cfg.cache_size = cache_size;
             cfg.seed = seed;
             const Builtin builtin = parse_evaluator(evaluator, false);
             std::unique_ptr<Engine> engine;
             try {
               engine = std::make_unique<Engine>(cfg);
             } catch (const std::invalid_argument& e) {
               throw nb::value_error(e.what());
             }
             nb::object bufs[2];
             if (!planes_buffers.is_none()) {
               if (nb::len(planes_buffers) != 2)
                 throw nb::value_error("planes_buffers must be a pair of arrays (double buffering)");
               float* p[2];
               for (int i = 0; i < 2; ++i) {
                 bufs[i] = planes_buffers[i];
                 p[i] = planes_buffer<G>(bufs[i], batch_size, i);
               }
               if (p[0] == p[1]) throw nb::value_error("planes_buffers must be two different arrays");
               engine->set_planes_buffers(p[0], p[1]);
             }
             auto* s = new (self) Sp();
             s->engine = std::move(engine);
             s->evaluator = evaluator;
             s->builtin = builtin;
             s->buffers[0] = bufs[0];
             s->buffers[1] = bufs[1];
           },
           "evaluator"_a.none(), nb::kw_only(), "num_simulations"_a = 100, "num_workers"_a = 1,
           "games_per_worker"_a = 1, "leaves_per_game"_a = 1, "batch_size"_a = 16, "timeout_us"_a = 1000,
           "flush_when_idle"_a = true, "spin_us"_a = 0, "c_puct"_a = 1.5f,
           "dirichlet_alpha"_a = Spec::kSelfPlayDirichletAlpha, "dirichlet_epsilon"_a = 0.25f, "virtual_loss"_a = 1.0f,
           "fpu_value"_a = 0.0f, "temperature"_a = 1.0f, "temperature_moves"_a = Spec::kTemperatureMoves,
           "policy"_a = "logits", "cache_size"_a = Spec::kCacheSize, "seed"_a = 0,
           "planes_buffers"_a.none() = nb::none(), "gumbel"_a = false, "gumbel_considered"_a = 16,
           "gumbel_c_visit"_a = 50.0f, "gumbel_c_scale"_a = 1.0f, "discount"_a = 1.0f, "fast_simulations"_a = 0,
           "full_search_prob"_a = 1.0f)
      .def("run", &Sp::run, "num_games"_a, Spec::kRunDoc)
      .def("stop", [](Sp& s) { s.engine->stop(); },
           "End the current run soon (any thread, also from inside the evaluator).")
      .def("close", &Sp::close, "Stop and wait for a running run() to return; later runs raise.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](Sp& s, nb::handle, nb::handle, nb::handle) { s.close(); }, "exc_type"_a.none(),
           "exc"_a.none(), "tb"_a.none())
      .def_prop_ro("running", [](const Sp& s) { return s.engine->running(); })
      .def_prop_ro("metrics", [](const Sp& s) { return s.last_metrics; }, "Metrics of the last run.")
      .def_prop_ro("evaluator", [](const Sp& s) { return s.evaluator; });
  def_next_game_id(selfplay);
}

}  // namespace meeple::search_bind
