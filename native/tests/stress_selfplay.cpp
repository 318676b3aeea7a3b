// Stress test of SelfPlayEngine without Python, meant for sanitizers:
//   cmake -S native -B build-tsan -DMEEPLE_NATIVE_BUILD_TESTS=ON -DMEEPLE_NATIVE_SANITIZE=thread ...
//   ./build-tsan/stress_selfplay
// Runs normal completions, stops from another thread and from inside the
// evaluator, and evaluator exceptions, over several worker / batch settings.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "connect4.hpp"
#include "selfplay.hpp"

using meeple::c4::Connect4;
namespace mc = meeple::mcts;

namespace {

int failures = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

void uniform(const mc::BatchView& v) {
  for (int i = 0; i < v.n * 7; ++i) v.policy_out[i] = 0.0f;
  for (int i = 0; i < v.n; ++i) v.value_out[i] = 0.0f;
}

mc::SelfPlayConfig make(int workers, int games, int leaves, int batch, int spin, bool idle_flush) {
  mc::SelfPlayConfig c;
  c.search.num_simulations = 32;
  c.search.dirichlet_epsilon = 0.25f;
  c.num_workers = workers;
  c.games_per_worker = games;
  c.leaves_per_game = leaves;
  c.batch_size = batch;
  c.timeout_us = 200;
  c.spin_us = spin;
  c.flush_when_idle = idle_flush;
  return c;
}

}  // namespace

int main() {
  const int settings[][4] = {{1, 1, 1, 1}, {1, 4, 4, 16}, {4, 2, 2, 8}, {3, 3, 8, 64}, {4, 1, 1, 256}};
  for (const auto& s : settings) {
    for (int spin : {0, 20}) {
      for (bool idle : {true, false}) {
        mc::SelfPlayEngine<Connect4> eng(make(s[0], s[1], s[2], s[3], spin, idle));
        auto r = eng.run(6, uniform);
        CHECK(r.games.size() == 6);
        for (auto& g : r.games) CHECK(!g.moves.empty() && g.value.size() == g.moves.size());

        // stop from another thread
        std::thread stopper([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          eng.stop();
        });
        auto r2 = eng.run(100000, uniform);
        stopper.join();
        CHECK(r2.metrics.stopped);

        // stop from inside the evaluator
        int calls = 0;
        auto r3 = eng.run(100000, [&](const mc::BatchView& v) {
          uniform(v);
          if (++calls == 10) eng.stop();
        });
        CHECK(r3.metrics.stopped);

        // evaluator exception
        calls = 0;
        bool thrown = false;
        try {
          eng.run(100000, [&](const mc::BatchView& v) {
            uniform(v);
            if (++calls == 7) throw std::runtime_error("boom");
          });
        } catch (const std::runtime_error&) {
          thrown = true;
        }
        CHECK(thrown);
        CHECK(!eng.running());
      }
    }
  }
  std::printf("stress_selfplay: %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
