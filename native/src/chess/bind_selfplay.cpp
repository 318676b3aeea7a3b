// Python binding of chess self-play: mcts::SelfPlayEngine<chess::Game> (the
// same engine as Connect Four's meeple_native.SelfPlay) -> meeple_native.chess.SelfPlay.
//
// The evaluator gets planes (B, 119, 8, 8) float32 and legal (B, 4672) bool
// and returns (policy (B, 4672), value (B,)), values from the side to move's
// view; None / "uniform" is a C++ evaluator (uniform priors, value 0).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "chess/bind_parts.hpp"
#include "chess/game.hpp"
#include "chess/traits.hpp"
#include "selfplay.hpp"
#include "selfplay_bind.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace mc = meeple::mcts;

namespace meeple::chess {
namespace {

constexpr std::size_t A = kNumActions;
constexpr std::size_t P = kNumPlanes;

struct PySelfPlay {
  std::unique_ptr<mc::SelfPlayEngine<Game>> engine;
  nb::object evaluator;  // None for the built-in uniform evaluator
  nb::object buffers[2];
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
    mc::SelfPlayEngine<Game>::EvalFn fn;
    if (evaluator.is_none()) {
      fn = [](const mc::BatchView& v) {
        std::fill(v.policy_out, v.policy_out + static_cast<std::size_t>(v.n) * A, 0.0f);
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
          planes = nb::cast(nb::ndarray<nb::numpy, const float>(v.planes, {n, P, 8, 8}, self_py));
        }
        nb::object legal =
            nb::cast(nb::ndarray<nb::numpy, const bool>(reinterpret_cast<const bool*>(v.legal), {n, A}, self_py));
        bind::call_evaluator(evaluator, planes, legal, n, v.policy_out, v.value_out);
      };
    }
    auto poll = [] {
      nb::gil_scoped_acquire acquire;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
    };
    mc::RunResult<Game> res;
    {
      nb::gil_scoped_release release;
      res = engine->run(num_games, fn, poll);
    }
    return to_dict(res);
  }

  nb::dict to_dict(mc::RunResult<Game>& res) {
    std::size_t total = 0;
    for (auto& g : res.games) total += g.moves.size();
    std::vector<float> planes, policy, value;
    std::vector<std::uint8_t> legal, full;
    planes.reserve(total * P * 64);
    policy.reserve(total * A);
    legal.reserve(total * A);
    std::vector<std::int64_t> game(total), game_id(res.games.size());
    std::vector<std::int32_t> ply(total);
    std::vector<std::int8_t> winner(res.games.size());
    nb::list moves, terminations;
    std::size_t k = 0;
    for (std::size_t gi = 0; gi < res.games.size(); ++gi) {
      auto& g = res.games[gi];
      planes.insert(planes.end(), g.planes.begin(), g.planes.end());
      policy.insert(policy.end(), g.policy.begin(), g.policy.end());
      value.insert(value.end(), g.value.begin(), g.value.end());
      legal.insert(legal.end(), g.legal.begin(), g.legal.end());
      full.insert(full.end(), g.full.begin(), g.full.end());
      // Replay to name the moves (UCI) and the way the game ended.
      Game replay;
      nb::list uci;
      for (std::size_t i = 0; i < g.moves.size(); ++i) {
        game[k] = static_cast<std::int64_t>(gi);
        ply[k] = static_cast<std::int32_t>(i);
        ++k;
        Move mv;
        action_to_move(g.moves[i], replay.position(), mv);
        uci.append(nb::str(Position::to_uci(mv).c_str()));
        replay.play_move(mv);
      }
      moves.append(uci);
      terminations.append(nb::str(termination_name(replay.termination())));
      game_id[gi] = static_cast<std::int64_t>(g.game_id);
      winner[gi] = static_cast<std::int8_t>(g.winner);
    }
    nb::dict d;
    d["planes"] = bind::to_numpy(std::move(planes), {total, P, 8, 8});
    d["policy"] = bind::to_numpy(std::move(policy), {total, A});
    d["value"] = bind::to_numpy(std::move(value), {total});
    d["legal"] = selfplay_bind::bool_array(std::move(legal), {total, A});
    d["game"] = bind::to_numpy(std::move(game), {total});
    d["ply"] = bind::to_numpy(std::move(ply), {total});
    d["full"] = selfplay_bind::bool_array(std::move(full), {total});  // 1: a full search (policy target)
    const std::size_t ng = res.games.size();
    d["game_id"] = bind::to_numpy(std::move(game_id), {ng});
    d["winner"] = bind::to_numpy(std::move(winner), {ng});
    d["moves"] = moves;
    d["termination"] = terminations;
    last_metrics = metrics_dict(res.metrics);
    d["metrics"] = last_metrics;
    return d;
  }

  // Stops a run going on in another thread and waits for it (from inside the
  // evaluator it only stops); later runs raise.
  void close() {
    closed.store(true);
    engine->stop();
    nb::gil_scoped_release release;
    std::unique_lock<std::mutex> lk(run_mu);
    if (in_run && run_thread == std::this_thread::get_id()) return;
    run_cv.wait(lk, [&] { return !in_run; });
  }

  nb::dict metrics_dict(const mc::SelfPlayMetrics& m) const {
    const auto& c = engine->config();
    const double wall = m.wall_s > 0 ? m.wall_s : 1e-9;
    double rows = 0;
    for (std::size_t i = 0; i < m.batch_size_hist.size(); ++i) rows += static_cast<double>(i * m.batch_size_hist[i]);
    const double mean = m.batches ? rows / static_cast<double>(m.batches) : 0.0;
    nb::dict d;
    d["wall_s"] = m.wall_s;
    d["games"] = m.games;
    d["positions"] = m.positions;
    d["simulations"] = m.simulations;
    d["evaluations"] = m.evaluations;
    d["batches"] = m.batches;
    d["simulations_per_s"] = static_cast<double>(m.simulations) / wall;
    d["positions_per_s"] = static_cast<double>(m.positions) / wall;
    d["games_per_h"] = static_cast<double>(m.games) / wall * 3600.0;
    d["batch_size_hist"] = m.batch_size_hist;
    d["evaluator_wait_fraction"] = std::min(1.0, m.evaluator_wait_s / wall);
    d["cache_hit_rate"] =
        m.cache_lookups ? static_cast<double>(m.cache_hits) / static_cast<double>(m.cache_lookups) : 0.0;
    d["num_workers"] = c.num_workers;
    d["games_per_worker"] = c.games_per_worker;
    d["leaves_per_game"] = c.leaves_per_game;
    d["batch_size"] = c.batch_size;
    d["mean_batch_size"] = mean;
    d["mean_fill_ratio"] = mean / c.batch_size;
    d["queue_latency_p50_us"] = m.latency_p50_us;
    d["queue_latency_p99_us"] = m.latency_p99_us;
    d["evaluator_s"] = m.evaluator_s;
    d["evaluator_idle_fraction"] = std::max(0.0, 1.0 - m.evaluator_s / wall);
    d["cache_hits"] = m.cache_hits;
    d["cache_lookups"] = m.cache_lookups;
    d["collisions"] = m.collisions;
    d["terminal_leaves"] = m.terminal_leaves;
    d["stopped"] = m.stopped;
    return d;
  }
};

int selfplay_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  PySelfPlay* s = nb::inst_ptr<PySelfPlay>(self);
  Py_VISIT(s->evaluator.ptr());
  Py_VISIT(s->buffers[0].ptr());
  Py_VISIT(s->buffers[1].ptr());
  Py_VISIT(s->last_metrics.ptr());
  return 0;
}

int selfplay_clear(PyObject* self) {
  PySelfPlay* s = nb::inst_ptr<PySelfPlay>(self);
  s->evaluator = nb::none();
  s->buffers[0] = nb::object();
  s->buffers[1] = nb::object();
  s->last_metrics = nb::dict();
  return 0;
}

PyType_Slot selfplay_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(selfplay_traverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(selfplay_clear)},
                                {0, nullptr}};

}  // namespace

void bind_selfplay(nb::module_& m) {
  auto selfplay = nb::class_<PySelfPlay>(m, "SelfPlay", nb::type_slots(selfplay_slots),
                         "Chess self-play on the generic engine (worker threads, batched evaluation queue); "
                         "the parameters mean what they mean for meeple_native.SelfPlay (native/README.md).")
      .def(
          "__init__",
          [](PySelfPlay* self, nb::object evaluator, int num_simulations, int num_workers, int games_per_worker,
             int leaves_per_game, int batch_size, std::int64_t timeout_us, bool flush_when_idle, int spin_us,
             float c_puct, float dirichlet_alpha, float dirichlet_epsilon, float virtual_loss, float fpu_value,
             float temperature, int temperature_moves, const std::string& policy, int cache_size,
             std::uint64_t seed, nb::object planes_buffers, bool gumbel, int gumbel_considered,
             float gumbel_c_visit, float gumbel_c_scale, float discount, int fast_simulations,
             float full_search_prob) {
            mc::SelfPlayConfig cfg;
            mc::set_search_options(cfg, gumbel, gumbel_considered, gumbel_c_visit, gumbel_c_scale, discount,
                                   fast_simulations, full_search_prob);
            cfg.search.num_simulations = num_simulations;
            cfg.search.c_puct = c_puct;
            cfg.search.dirichlet_alpha = dirichlet_alpha;
            cfg.search.dirichlet_epsilon = dirichlet_epsilon;
            cfg.search.virtual_loss = virtual_loss;
            cfg.search.fpu_value = fpu_value;
            cfg.flush_when_idle = flush_when_idle;
            cfg.spin_us = spin_us;
            cfg.num_workers = num_workers;
            cfg.games_per_worker = games_per_worker;
            cfg.leaves_per_game = leaves_per_game;
            cfg.batch_size = batch_size;
            cfg.timeout_us = timeout_us;
            cfg.temperature = temperature;
            cfg.temperature_moves = temperature_moves;
            if (policy != "logits" && policy != "priors")
              throw nb::value_error(("policy must be 'logits' or 'priors', got '" + policy + "'").c_str());
            cfg.policy_logits = policy == "logits";
            cfg.cache_size = cache_size;
            cfg.seed = seed;
            if (nb::isinstance<nb::str>(evaluator)) {
              if (nb::cast<std::string>(evaluator) != "uniform")
                throw nb::value_error("evaluator must be a callable, None or 'uniform'");
              evaluator = nb::none();
            } else if (!evaluator.is_none() && !PyCallable_Check(evaluator.ptr())) {
              throw nb::type_error("evaluator must be a callable, None or 'uniform'");
            }
            std::unique_ptr<mc::SelfPlayEngine<Game>> engine;
            try {
              engine = std::make_unique<mc::SelfPlayEngine<Game>>(cfg);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
            nb::object bufs[2];
            if (!planes_buffers.is_none()) {
              if (nb::len(planes_buffers) != 2) throw nb::value_error("planes_buffers must be a pair of arrays");
              float* p[2];
              for (int i = 0; i < 2; ++i) {
                bufs[i] = planes_buffers[i];
                p[i] = bind::out_buffer<float>(bufs[i], {static_cast<std::size_t>(batch_size), P, 8, 8},
                                               i == 0 ? "planes_buffers[0]" : "planes_buffers[1]", "float32");
              }
              if (p[0] == p[1]) throw nb::value_error("planes_buffers must be two different arrays");
              engine->set_planes_buffers(p[0], p[1]);
            }
            auto* s = new (self) PySelfPlay();
            s->buffers[0] = bufs[0];
            s->buffers[1] = bufs[1];
            s->engine = std::move(engine);
            s->evaluator = evaluator;
          },
          "evaluator"_a.none(), nb::kw_only(), "num_simulations"_a = 100, "num_workers"_a = 1,
          "games_per_worker"_a = 1, "leaves_per_game"_a = 1, "batch_size"_a = 16, "timeout_us"_a = 1000,
          "flush_when_idle"_a = true, "spin_us"_a = 0, "c_puct"_a = 1.5f, "dirichlet_alpha"_a = 0.3f,
          "dirichlet_epsilon"_a = 0.25f, "virtual_loss"_a = 1.0f, "fpu_value"_a = 0.0f, "temperature"_a = 1.0f,
          "temperature_moves"_a = 30, "policy"_a = "logits", "cache_size"_a = 1 << 12, "seed"_a = 0,
          "planes_buffers"_a.none() = nb::none(), "gumbel"_a = false, "gumbel_considered"_a = 16,
          "gumbel_c_visit"_a = 50.0f, "gumbel_c_scale"_a = 1.0f, "discount"_a = 1.0f, "fast_simulations"_a = 0,
          "full_search_prob"_a = 1.0f)
      .def("run", &PySelfPlay::run, "num_games"_a,
           "Play num_games games from the initial position; returns samples (planes (N, 119, 8, 8), policy "
           "(N, 4672), value (N,), legal (N, 4672), game, ply), per game moves (UCI lists), termination, "
           "winner (0 white, 1 black, -1 draw), game_id, and metrics.")
      .def("stop", [](PySelfPlay& s) { s.engine->stop(); }, "End the current run soon (any thread).")
      .def("close", &PySelfPlay::close, "Stop and wait for a running run() to return; later runs raise.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PySelfPlay& s, nb::handle, nb::handle, nb::handle) { s.close(); }, "exc_type"_a.none(),
           "exc"_a.none(), "tb"_a.none())
      .def_prop_ro("running", [](const PySelfPlay& s) { return s.engine->running(); })
      .def_prop_ro("metrics", [](const PySelfPlay& s) { return s.last_metrics; }, "Metrics of the last run.")
      .def_prop_ro("evaluator", [](const PySelfPlay& s) { return s.evaluator; });
  meeple::selfplay_bind::def_next_game_id(selfplay);
}

}  // namespace meeple::chess
