// Self-play coordinator: worker threads run MCTS games, leaves needing a network
// evaluation go through one batched evaluation queue (header-only, no Python).
//
// Thread model
// * W worker threads (std::thread). Each owns G game slots (a Tree with its
//   node arena, reserved once, per slot), its evaluation cache, its inbox of
//   results and its counters. A worker never touches Python.
// * The thread that calls run() is the evaluator thread: it waits for a batch
//   (size threshold or timeout since the batch's first item), calls the
//   evaluator function once per batch, and fans results back to the workers'
//   inboxes. The Python binding releases the GIL for the whole run and takes it
//   only inside the evaluator call and a periodic signal check (poll).
// * Two batch buffers (double buffering): workers encode leaves straight into
//   the filling buffer while the other one is being evaluated. Workers block
//   only when the filling buffer is full and the other is still being evaluated.
//
// Shutdown: stop() (any thread), an exception from the evaluator or a worker, or
// normal completion set `stop_`; every wait in this file has stop_ in its
// predicate and request_stop() notifies every condition variable with its
// mutex held, so no thread can miss it. run() joins all workers before it
// returns or rethrows.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mcts.hpp"

namespace meeple::mcts {

// Busy-wait hint between polls of a spinning wait (SelfPlayConfig::spin_us).
// Measured on the shared 2-core VMs: blocking at once (spin_us = 0, the default)
// is the robust choice. Spinning with sched_yield helped at moderate load but
// collapsed (up to 30x slower) when other processes kept the cores busy, since
// a yield hands the core away for a whole time slice; a plain busy spin only
// pays when every waiting thread has a core of its own.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  for (int i = 0; i < 16; ++i) __builtin_ia32_pause();
#elif defined(__aarch64__)
  for (int i = 0; i < 16; ++i) asm volatile("yield" ::: "memory");
#endif
}

struct SelfPlayConfig {
  SearchParams search;             // search.num_simulations per move; dirichlet_epsilon > 0 for noise
  int num_workers = 1;             // W worker threads
  int games_per_worker = 1;        // G concurrent games per worker
  int leaves_per_game = 1;         // L leaves in flight per game (virtual loss)
  int batch_size = 16;             // evaluator batch (rows)
  std::int64_t timeout_us = 1000;  // flush a non-empty batch this long after its first item
  bool flush_when_idle = true;     // also flush at once when every worker waits for results
  int spin_us = 0;                 // busy-spin this long before blocking (0: block at once)
  int temperature_moves = 8;       // plies sampled with `temperature`, then greedy
  float temperature = 1.0f;
  bool policy_logits = true;       // evaluator returns logits (softmax over legal moves) or priors
  int cache_size = 1 << 16;        // evaluation cache entries per worker (rounded to 2^k); 0 = off
  std::uint64_t seed = 0;
  // Playout cap randomisation (Wu, "Accelerating self-play learning in Go", 2019): with
  // fast_simulations > 0, a move gets the full search.num_simulations with probability
  // full_search_prob and otherwise a fast search of fast_simulations without root noise;
  // only full-search positions are marked as policy targets (GameRecord::full).
  int fast_simulations = 0;
  float full_search_prob = 1.0f;
};

// The search options both games' SelfPlay bindings take (Gumbel root, discount, playout
// cap randomisation); SelfPlayEngine::validate checks them.
inline void set_search_options(SelfPlayConfig& cfg, bool gumbel, int gumbel_considered, float gumbel_c_visit,
                               float gumbel_c_scale, float discount, int fast_simulations,
                               float full_search_prob) {
  cfg.search.gumbel = gumbel;
  cfg.search.gumbel_considered = gumbel_considered;
  cfg.search.gumbel_c_visit = gumbel_c_visit;
  cfg.search.gumbel_c_scale = gumbel_c_scale;
  cfg.search.discount = discount;
  cfg.fast_simulations = fast_simulations;
  cfg.full_search_prob = full_search_prob;
}

// One evaluator call: rows [0, n) of the buffers.
struct BatchView {
  const float* planes;  // n x obs_size
  const std::uint8_t* legal;  // n x num_actions (0/1)
  int n;
  float* policy_out;  // n x num_actions (logits or priors, per config)
  float* value_out;   // n (side to move's view, in [-1, 1])
  int buffer_index;   // which of the two batch buffers (0 or 1)
};

template <class G>
struct GameRecord {
  std::uint64_t game_id = 0;           // per engine, counts up across runs
  std::vector<int> moves;
  std::vector<float> planes;           // plies x obs_size (root position of each move)
  std::vector<float> policy;           // plies x num_actions (visit counts, normalised)
  std::vector<std::uint8_t> legal;     // plies x num_actions
  std::vector<std::int8_t> to_play;    // plies
  std::vector<float> value;            // plies: result from the mover's view (times discount^plies_left)
  std::vector<std::uint8_t> full;      // plies: 1 if the move had a full search (a policy target)
  int winner = -1;                     // 0 / 1, or -1 for a draw
};

struct SelfPlayMetrics {
  double wall_s = 0;
  std::uint64_t games = 0, positions = 0, simulations = 0, evaluations = 0, batches = 0;
  std::uint64_t cache_lookups = 0, cache_hits = 0, collisions = 0, terminal_leaves = 0;
  double evaluator_s = 0;        // inside the evaluator function
  double evaluator_wait_s = 0;   // waiting for a batch to form
  std::vector<std::uint64_t> batch_size_hist;  // index = batch size
  double latency_p50_us = 0, latency_p99_us = 0;
  bool stopped = false;
};

template <class G>
struct RunResult {
  std::vector<GameRecord<G>> games;  // completed games, by game_id
  SelfPlayMetrics metrics;
};

template <class G>
class SelfPlayEngine {
 public:
  using Traits = GameTraits<G>;
  static constexpr int A = Traits::kNumActions;
  static constexpr int kObs = Traits::kObsSize;
  using Clock = std::chrono::steady_clock;
  using EvalFn = std::function<void(const BatchView&)>;
  using PollFn = std::function<void()>;  // called about every 50 ms while waiting; may throw

  explicit SelfPlayEngine(const SelfPlayConfig& cfg) : cfg_(cfg) {
    validate(cfg_);
    for (auto& b : bufs_) {
      b.own_planes.assign(static_cast<std::size_t>(cfg_.batch_size) * kObs, 0.0f);
      b.planes = b.own_planes.data();
      b.legal.assign(static_cast<std::size_t>(cfg_.batch_size) * A, 0);
      b.meta.resize(cfg_.batch_size);
      b.policy.assign(static_cast<std::size_t>(cfg_.batch_size) * A, 0.0f);
      b.value.assign(cfg_.batch_size, 0.0f);
    }
  }
  SelfPlayEngine(const SelfPlayEngine&) = delete;
  SelfPlayEngine& operator=(const SelfPlayEngine&) = delete;
  ~SelfPlayEngine() {
    request_stop();
    join_workers();
  }

  static void validate(const SelfPlayConfig& c) {
    auto bad = [](const std::string& name, const std::string& want, double got) {
      throw std::invalid_argument(name + " must be " + want + ", got " + std::to_string(got));
    };
    if (c.num_workers < 1 || c.num_workers > 1024) bad("num_workers", "1..1024", c.num_workers);
    if (c.games_per_worker < 1 || c.games_per_worker > 65536) bad("games_per_worker", "1..65536", c.games_per_worker);
    if (c.leaves_per_game < 1 || c.leaves_per_game > 4096) bad("leaves_per_game", "1..4096", c.leaves_per_game);
    if (c.batch_size < 1 || c.batch_size > (1 << 20)) bad("batch_size", "1..1048576", c.batch_size);
    if (c.timeout_us < 0) bad("timeout_us", ">= 0", static_cast<double>(c.timeout_us));
    if (c.search.num_simulations < 1 || c.search.num_simulations > (1 << 24))
      bad("num_simulations", "1..16777216", c.search.num_simulations);
    if (!(c.search.c_puct >= 0.0f)) bad("c_puct", ">= 0", c.search.c_puct);
    if (!(c.search.dirichlet_alpha > 0.0f)) bad("dirichlet_alpha", "> 0", c.search.dirichlet_alpha);
    if (!(c.search.dirichlet_epsilon >= 0.0f && c.search.dirichlet_epsilon <= 1.0f))
      bad("dirichlet_epsilon", "in [0, 1]", c.search.dirichlet_epsilon);
    if (!(c.search.virtual_loss >= 0.0f)) bad("virtual_loss", ">= 0", c.search.virtual_loss);
    if (c.temperature_moves < 0) bad("temperature_moves", ">= 0", c.temperature_moves);
    if (!(c.temperature >= 0.0f)) bad("temperature", ">= 0", c.temperature);
    if (c.cache_size < 0 || c.cache_size > (1 << 26)) bad("cache_size", "0..67108864", c.cache_size);
    if (c.spin_us < 0 || c.spin_us > 1000000) bad("spin_us", "0..1000000", c.spin_us);
    if (c.search.gumbel_considered < 1 || c.search.gumbel_considered > 4096)
      bad("gumbel_considered", "1..4096", c.search.gumbel_considered);
    if (!(c.search.gumbel_c_visit >= 0.0f)) bad("gumbel_c_visit", ">= 0", c.search.gumbel_c_visit);
    if (!(c.search.gumbel_c_scale > 0.0f)) bad("gumbel_c_scale", "> 0", c.search.gumbel_c_scale);
    if (!(c.search.discount > 0.0f && c.search.discount <= 1.0f)) bad("discount", "in (0, 1]", c.search.discount);
    if (c.fast_simulations < 0 || c.fast_simulations > c.search.num_simulations)
      bad("fast_simulations", "0..num_simulations (" + std::to_string(c.search.num_simulations) + ")",
          c.fast_simulations);
    if (!(c.full_search_prob >= 0.0f && c.full_search_prob <= 1.0f))
      bad("full_search_prob", "in [0, 1]", c.full_search_prob);
  }

  const SelfPlayConfig& config() const { return cfg_; }

  // Use caller-owned memory for the two planes buffers (each batch_size x obs_size
  // floats, e.g. pinned host memory); must outlive the engine's runs.
  void set_planes_buffers(float* a, float* b) {
    bufs_[0].planes = a;
    bufs_[1].planes = b;
  }
  const float* planes_buffer(int i) const { return bufs_[i].planes; }

  // Asks a running run() to end: workers and the evaluator loop return soon;
  // run() then returns the games completed so far (metrics.stopped = true).
  void stop() {
    user_stop_.store(true);
    request_stop();
  }

  bool running() const { return running_.load(); }

  // Id of the next game to start: each game's random stream derives from (seed, id), so a
  // resumed run that restores it plays the games an uninterrupted run would have played.
  std::uint64_t next_game_id() const { return next_game_id_; }
  void set_next_game_id(std::uint64_t id) {
    if (running_.load()) throw std::runtime_error("SelfPlay.next_game_id cannot change during run()");
    next_game_id_ = id;
  }

  // Plays num_games complete games (all started games are finished, none is
  // abandoned unless stopped). `eval` runs on this thread, once per batch.
  RunResult<G> run(int num_games, const EvalFn& eval, const PollFn& poll = {}) {
    if (num_games < 0) throw std::invalid_argument("num_games must be >= 0, got " + std::to_string(num_games));
    bool expected = false;
    if (!running_.compare_exchange_strong(expected, true))
      throw std::runtime_error("SelfPlay.run() is already running (one run at a time)");
    struct Clear {
      std::atomic<bool>& flag;
      ~Clear() { flag.store(false); }
    } clear{running_};

    prepare(num_games);
    const auto t0 = Clock::now();
    std::exception_ptr err;
    try {
      for (int w = 0; w < cfg_.num_workers; ++w) threads_.emplace_back([this, w] { worker_main(w); });
      evaluator_loop(eval, poll);
    } catch (...) {
      err = std::current_exception();
    }
    request_stop();
    join_workers();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!err) {
      std::lock_guard<std::mutex> lk(err_mu_);
      err = worker_error_;
    }
    next_game_id_ += std::min<std::uint64_t>(games_started_.load(), static_cast<std::uint64_t>(num_games));
    if (err) std::rethrow_exception(err);
    return collect(wall);
  }

 private:
  struct Request {
    std::int32_t worker;
    std::int32_t slot;
    std::int32_t node;
    G state;
    Clock::time_point t_push;
  };
  struct Result {
    std::int32_t slot;
    std::int32_t node;
    G state;
    float policy[A];
    float value;
  };
  struct BatchBuf {
    std::vector<float> own_planes;
    float* planes = nullptr;
    std::vector<std::uint8_t> legal;
    std::vector<Request> meta;
    std::vector<float> policy, value;
    int count = 0;
    Clock::time_point first;
  };
  struct CacheEntry {
    std::uint64_t key = 0;  // position key + 1 (0 = empty)
    float priors[Traits::kMaxLegal];
    float value;
  };
  struct Slot {
    Tree<G> tree;
    G state;
    Rng rng;
    GameRecord<G> rec;
    bool active = false;
    bool blocked = false;  // a collision: wait for a result before issuing more
    bool full = true;      // this move's search is a full one (playout cap randomisation)
  };

  // The generator for a root's noise, or none: fast searches have no noise, and a Gumbel
  // root's noise (which also samples the move played) stops after temperature_moves plies,
  // like the visit-count temperature of PUCT self-play.
  Rng* root_noise(Slot& s) const {
    if (!s.full) return nullptr;
    if (cfg_.search.gumbel && static_cast<int>(s.rec.moves.size()) >= cfg_.temperature_moves) return nullptr;
    return &s.rng;
  }
  struct Worker {
    std::vector<Slot> slots;
    std::vector<CacheEntry> cache;
    std::vector<Request> outbox;
    std::vector<Result> inbox, inbox_local;
    std::vector<GameRecord<G>> finished;
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> has_inbox{false};  // inbox non-empty (for spinning without the lock)
    // counters (owned by the worker thread, read after join)
    std::uint64_t simulations = 0, positions = 0, evaluations = 0, cache_lookups = 0, cache_hits = 0,
                  collisions = 0, terminal_leaves = 0;
  };

  void prepare(int num_games) {
    stop_.store(false);
    user_stop_.store(false);
    worker_error_ = nullptr;
    target_games_ = static_cast<std::uint64_t>(num_games);
    games_started_.store(0);
    for (auto& b : bufs_) b.count = 0;
    filling_ = 0;
    waiting_ = 0;
    active_ = cfg_.num_workers;
    batch_hist_.assign(cfg_.batch_size + 1, 0);
    latencies_.clear();
    latency_seen_ = 0;
    eval_s_ = wait_s_ = 0.0;
    if (workers_.size() != static_cast<std::size_t>(cfg_.num_workers)) {
      workers_.clear();
      for (int w = 0; w < cfg_.num_workers; ++w) workers_.emplace_back(std::make_unique<Worker>());
      for (auto& wk : workers_) {
        wk->slots.resize(cfg_.games_per_worker);
        for (auto& s : wk->slots) s.tree.set_params(cfg_.search);
        if (cfg_.cache_size > 0) {
          std::size_t n = 1;
          while (n < static_cast<std::size_t>(cfg_.cache_size)) n <<= 1;
          wk->cache.resize(n);
        }
      }
      staging_.assign(cfg_.num_workers, {});
    }
    for (auto& wk : workers_) {
      // The evaluator may have changed between runs: start with an empty cache.
      for (auto& e : wk->cache) e.key = 0;
      for (auto& s : wk->slots) s.active = s.blocked = false;
      wk->outbox.clear();
      wk->inbox.clear();
      wk->has_inbox.store(false);
      wk->finished.clear();
      wk->simulations = wk->positions = wk->evaluations = wk->cache_lookups = wk->cache_hits = 0;
      wk->collisions = wk->terminal_leaves = 0;
    }
  }

  void request_stop() {
    stop_.store(true);
    { std::lock_guard<std::mutex> lk(qmu_); }
    eval_cv_.notify_all();
    space_cv_.notify_all();
    for (auto& wk : workers_) {
      { std::lock_guard<std::mutex> lk(wk->mu); }
      wk->cv.notify_all();
    }
  }

  void join_workers() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

  // ---------------------------------------------------------------- workers
  bool start_game(Slot& s) {
    const std::uint64_t k = games_started_.fetch_add(1);
    if (k >= target_games_) return false;
    const std::uint64_t id = next_game_id_ + k;
    s.rng.seed_with(Rng::derive(cfg_.seed, id));
    s.state = G{};
    begin_search(s);
    s.rec = GameRecord<G>{};
    s.rec.game_id = id;
    s.active = true;
    s.blocked = false;
    return true;
  }

  // A new search from the slot's position: full or fast (playout cap randomisation).
  void begin_search(Slot& s) {
    SearchParams p = cfg_.search;
    s.full = cfg_.fast_simulations <= 0 || s.rng.uniform() < cfg_.full_search_prob;
    if (!s.full) p.num_simulations = cfg_.fast_simulations;
    s.tree.set_params(p);
    s.tree.reset(s.state);
  }

  // Records the root position and the search's policy target, plays the chosen move.
  void make_move(Worker& wk, Slot& s) {
    GameRecord<G>& r = s.rec;
    const int ply = static_cast<int>(r.moves.size());
    const std::size_t p0 = r.policy.size();
    r.policy.resize(p0 + A);
    s.tree.policy_target(r.policy.data() + p0);
    r.full.push_back(s.full ? 1 : 0);
    const std::size_t o0 = r.planes.size();
    r.planes.resize(o0 + kObs);
    s.state.encode(r.planes.data() + o0);
    int legal[Traits::kMaxLegal];
    const int nl = s.state.legal_moves(legal);
    const std::size_t l0 = r.legal.size();
    r.legal.resize(l0 + A, 0);
    for (int i = 0; i < nl; ++i) r.legal[l0 + legal[i]] = 1;
    r.to_play.push_back(static_cast<std::int8_t>(s.state.to_play()));

    const float tau = ply < cfg_.temperature_moves ? cfg_.temperature : 0.0f;
    const int a = s.tree.choose_action(tau, s.rng);
    s.state.play(a);
    r.moves.push_back(a);
    ++wk.positions;
    if (s.state.is_terminal()) {
      const float tv = static_cast<float>(s.state.terminal_value());
      const int last = s.state.to_play();
      const std::size_t plies = r.to_play.size();
      r.value.resize(plies);
      // discount^(plies left): a faster win is worth more (SearchParams::discount)
      float scale = 1.0f;
      for (std::size_t i = plies; i-- > 0;) {
        scale *= cfg_.search.discount;
        r.value[i] = ((r.to_play[i] == last) ? tv : -tv) * scale;
      }
      r.winner = tv < 0 ? 1 - last : (tv > 0 ? last : -1);
      wk.finished.push_back(std::move(r));
      s.active = false;
    } else {
      begin_search(s);
    }
  }

  CacheEntry* cache_find(Worker& wk, std::uint64_t key) {
    if (wk.cache.empty()) return nullptr;
    ++wk.cache_lookups;
    CacheEntry& e = wk.cache[static_cast<std::size_t>(hash(key)) & (wk.cache.size() - 1)];
    if (e.key == key + 1) {
      ++wk.cache_hits;
      return &e;
    }
    return nullptr;
  }
  static std::uint64_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }

  // Advances one slot as far as it goes without waiting. Returns true on progress.
  bool advance(Worker& wk, int w, int si) {
    Slot& s = wk.slots[si];
    bool progress = false;
    const int L = cfg_.leaves_per_game;
    for (;;) {
      if (!s.active) {
        if (!start_game(s)) return progress;
        progress = true;
      }
      if (s.tree.done()) {
        make_move(wk, s);
        progress = true;
        continue;
      }
      while (!s.blocked && s.tree.in_flight() < L && s.tree.wants_more()) {
        auto leaf = s.tree.select();
        if (leaf.kind == Tree<G>::LeafKind::kCollision) {
          ++wk.collisions;
          s.blocked = true;
          break;
        }
        progress = true;
        if (leaf.kind == Tree<G>::LeafKind::kTerminal) {
          ++wk.simulations;
          ++wk.terminal_leaves;
          continue;
        }
        if (CacheEntry* e = cache_find(wk, leaf.state.key())) {
          s.tree.expand(leaf.node, leaf.state, e->priors, e->value, root_noise(s));
          ++wk.simulations;
          continue;
        }
        wk.outbox.push_back(Request{w, si, leaf.node, leaf.state, {}});
      }
      if (!s.tree.done()) return progress;
    }
  }

  void apply_results(Worker& wk) {
    for (Result& r : wk.inbox_local) {
      Slot& s = wk.slots[r.slot];
      int legal[Traits::kMaxLegal];
      float pri[Traits::kMaxLegal];
      const int n = r.state.legal_moves(legal);
      legal_priors(r.policy, legal, n, cfg_.policy_logits, pri);
      const float v = std::max(-1.0f, std::min(1.0f, r.value));
      if (!wk.cache.empty()) {
        CacheEntry& e = wk.cache[static_cast<std::size_t>(hash(r.state.key())) & (wk.cache.size() - 1)];
        e.key = r.state.key() + 1;
        std::memcpy(e.priors, pri, sizeof(float) * n);
        e.value = v;
      }
      s.tree.expand(r.node, r.state, pri, v, root_noise(s));
      s.blocked = false;
      ++wk.simulations;
    }
    wk.inbox_local.clear();
  }

  void worker_main(int w) {
    Worker& wk = *workers_[w];
    try {
      while (!stop_.load(std::memory_order_relaxed)) {
        {
          std::lock_guard<std::mutex> lk(wk.mu);
          wk.inbox_local.swap(wk.inbox);
          wk.has_inbox.store(false, std::memory_order_relaxed);
        }
        bool progress = !wk.inbox_local.empty();
        apply_results(wk);
        bool any_active = false;
        for (int si = 0; si < cfg_.games_per_worker; ++si) {
          progress |= advance(wk, w, si);
          any_active |= wk.slots[si].active;
        }
        if (!wk.outbox.empty()) {
          wk.evaluations += wk.outbox.size();
          push(wk.outbox);
          wk.outbox.clear();
          continue;
        }
        if (!any_active) break;  // no game left to play here
        if (!progress) wait_for_results(wk);
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lk(err_mu_);
        if (!worker_error_) worker_error_ = std::current_exception();
      }
      request_stop();
    }
    {
      std::lock_guard<std::mutex> lk(qmu_);
      --active_;
    }
    eval_cv_.notify_all();
  }

  // Blocks until the inbox has results (or stop). The worker counts as waiting
  // (for flush_when_idle) from the start, also while it spins.
  void wait_for_results(Worker& wk) {
    {
      std::lock_guard<std::mutex> lk(qmu_);
      ++waiting_;
    }
    eval_cv_.notify_one();
    bool ready = false;
    if (cfg_.spin_us > 0) {
      const auto until = Clock::now() + std::chrono::microseconds(cfg_.spin_us);
      do {
        if (wk.has_inbox.load(std::memory_order_acquire) || stop_.load()) {
          ready = true;
          break;
        }
        cpu_relax();
      } while (Clock::now() < until);
    }
    if (!ready) {
      std::unique_lock<std::mutex> lk(wk.mu);
      wk.cv.wait(lk, [&] { return !wk.inbox.empty() || stop_.load(); });
    }
    std::lock_guard<std::mutex> lk(qmu_);
    --waiting_;
  }

  // Encodes requests into the filling batch buffer; blocks while it is full.
  void push(std::vector<Request>& reqs) {
    std::unique_lock<std::mutex> lk(qmu_);
    for (Request& r : reqs) {
      if (bufs_[filling_].count >= cfg_.batch_size && cfg_.spin_us > 0) {
        eval_cv_.notify_one();
        const auto until = Clock::now() + std::chrono::microseconds(cfg_.spin_us);
        while (bufs_[filling_].count >= cfg_.batch_size && !stop_.load() && Clock::now() < until) {
          lk.unlock();
          cpu_relax();
          lk.lock();
        }
      }
      while (bufs_[filling_].count >= cfg_.batch_size && !stop_.load()) {
        eval_cv_.notify_one();
        space_cv_.wait(lk);
      }
      if (stop_.load()) return;
      BatchBuf& b = bufs_[filling_];
      const int i = b.count++;
      const auto now = Clock::now();
      if (i == 0) b.first = now;
      r.state.encode(b.planes + static_cast<std::size_t>(i) * kObs);
      std::uint8_t* lg = b.legal.data() + static_cast<std::size_t>(i) * A;
      std::memset(lg, 0, A);
      int legal[Traits::kMaxLegal];
      const int n = r.state.legal_moves(legal);
      for (int k = 0; k < n; ++k) lg[legal[k]] = 1;
      r.t_push = now;
      b.meta[i] = r;
      if (i == 0 || b.count == cfg_.batch_size) eval_cv_.notify_one();
    }
  }

  // ---------------------------------------------------------------- evaluator
  void evaluator_loop(const EvalFn& eval, const PollFn& poll) {
    const auto timeout = std::chrono::microseconds(cfg_.timeout_us);
    const auto poll_every = std::chrono::milliseconds(50);
    auto next_poll = Clock::now() + poll_every;
    const auto spin = std::chrono::microseconds(cfg_.spin_us);
    auto spin_until = Clock::now() + spin;
    std::unique_lock<std::mutex> lk(qmu_);
    for (;;) {
      if (stop_.load()) return;
      BatchBuf& b = bufs_[filling_];
      const auto now = Clock::now();
      if (poll && now >= next_poll) {
        lk.unlock();
        poll();
        lk.lock();
        next_poll = Clock::now() + poll_every;
        continue;
      }
      const bool all_waiting = cfg_.flush_when_idle && active_ > 0 && waiting_ >= active_;
      const bool ready = b.count >= cfg_.batch_size || (b.count > 0 && (now >= b.first + timeout || all_waiting));
      if (!ready) {
        if (active_ == 0 && b.count == 0) return;  // every worker has finished
        if (cfg_.spin_us > 0 && now < spin_until) {
          lk.unlock();
          cpu_relax();
          lk.lock();
          wait_s_ += std::chrono::duration<double>(Clock::now() - now).count();
          continue;
        }
        auto deadline = b.count > 0 ? b.first + timeout : now + poll_every;
        if (poll) deadline = std::min(deadline, next_poll);
        eval_cv_.wait_until(lk, deadline);
        wait_s_ += std::chrono::duration<double>(Clock::now() - now).count();
        continue;
      }
      const int e = filling_;
      filling_ = 1 - e;  // the other buffer is empty: it was scattered before
      lk.unlock();
      space_cv_.notify_all();
      evaluate(bufs_[e], e, eval);
      lk.lock();
      bufs_[e].count = 0;
      spin_until = Clock::now() + spin;
    }
  }

  void evaluate(BatchBuf& b, int index, const EvalFn& eval) {
    const int n = b.count;
    const BatchView view{b.planes, b.legal.data(), n, b.policy.data(), b.value.data(), index};
    const auto t0 = Clock::now();
    eval(view);
    const auto t1 = Clock::now();
    eval_s_ += std::chrono::duration<double>(t1 - t0).count();
    ++batch_hist_[n];
    for (auto& v : staging_) v.clear();
    for (int i = 0; i < n; ++i) {
      const Request& m = b.meta[i];
      Result r;
      r.slot = m.slot;
      r.node = m.node;
      r.state = m.state;
      std::memcpy(r.policy, b.policy.data() + static_cast<std::size_t>(i) * A, sizeof(float) * A);
      r.value = b.value[i];
      staging_[m.worker].push_back(r);
      record_latency(std::chrono::duration<double, std::micro>(t1 - m.t_push).count());
    }
    for (std::size_t w = 0; w < staging_.size(); ++w) {
      if (staging_[w].empty()) continue;
      Worker& wk = *workers_[w];
      {
        std::lock_guard<std::mutex> lk(wk.mu);
        wk.inbox.insert(wk.inbox.end(), staging_[w].begin(), staging_[w].end());
        wk.has_inbox.store(true, std::memory_order_release);
      }
      wk.cv.notify_one();
    }
  }

  void record_latency(double us) {
    constexpr std::size_t kMax = 1 << 20;  // reservoir of latencies
    const auto v = static_cast<float>(us);
    ++latency_seen_;
    if (latencies_.size() < kMax) {
      latencies_.push_back(v);
    } else {
      const std::uint64_t j = latency_rng_() % latency_seen_;
      if (j < kMax) latencies_[j] = v;
    }
  }

  RunResult<G> collect(double wall) {
    RunResult<G> out;
    SelfPlayMetrics& m = out.metrics;
    m.wall_s = wall;
    for (auto& wk : workers_) {
      m.positions += wk->positions;
      m.simulations += wk->simulations;
      m.evaluations += wk->evaluations;
      m.cache_lookups += wk->cache_lookups;
      m.cache_hits += wk->cache_hits;
      m.collisions += wk->collisions;
      m.terminal_leaves += wk->terminal_leaves;
      for (auto& g : wk->finished) out.games.push_back(std::move(g));
      wk->finished.clear();
    }
    std::sort(out.games.begin(), out.games.end(),
              [](const GameRecord<G>& a, const GameRecord<G>& b) { return a.game_id < b.game_id; });
    m.games = out.games.size();
    m.batch_size_hist = batch_hist_;
    for (std::size_t i = 0; i < batch_hist_.size(); ++i) m.batches += batch_hist_[i];
    m.evaluator_s = eval_s_;
    m.evaluator_wait_s = wait_s_;
    m.stopped = user_stop_.load();
    if (!latencies_.empty()) {
      auto pct = [&](double q) {
        const auto k = static_cast<std::size_t>(q * static_cast<double>(latencies_.size() - 1));
        std::nth_element(latencies_.begin(), latencies_.begin() + static_cast<std::ptrdiff_t>(k), latencies_.end());
        return static_cast<double>(latencies_[k]);
      };
      m.latency_p50_us = pct(0.50);
      m.latency_p99_us = pct(0.99);
    }
    return out;
  }

  SelfPlayConfig cfg_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::vector<std::vector<Result>> staging_;  // evaluator thread: results per worker

  // queue state, guarded by qmu_
  std::mutex qmu_;
  std::condition_variable eval_cv_, space_cv_;
  BatchBuf bufs_[2];
  int filling_ = 0;
  int waiting_ = 0;  // workers blocked waiting for results
  int active_ = 0;   // workers still running

  std::atomic<bool> stop_{false}, user_stop_{false}, running_{false};
  std::atomic<std::uint64_t> games_started_{0};
  std::uint64_t target_games_ = 0;
  std::uint64_t next_game_id_ = 0;
  std::mutex err_mu_;
  std::exception_ptr worker_error_;

  // evaluator-thread statistics
  std::vector<std::uint64_t> batch_hist_;
  std::vector<float> latencies_;
  std::uint64_t latency_seen_ = 0;
  Rng latency_rng_{12345};
  double eval_s_ = 0, wait_s_ = 0;
};

}  // namespace meeple::mcts
