// Generic PUCT Monte Carlo tree search with virtual loss (header-only).
//
// `Tree<G>` searches one game's position. It is templated on a game state type
// `G` that is cheap to copy (search copies states instead of undoing moves) and
// provides:
//   int  legal_moves(int* out) const   legal actions, returns how many
//   void play(int a)                   plays a legal action (unchecked)
//   bool is_terminal() const
//   int/float terminal_value() const   terminal value for the side to move (-1, 0, +1)
//   int  to_play() const               player to move (two players, alternating)
//   uint64 key() const                 position key (evaluation cache)
//   void encode(float* out) const      network input planes
// plus a `GameTraits<G>` specialisation with the sizes (see connect4 below).
//
// Conventions
// * Values are from the point of view of the side to move at the node being
//   evaluated; backup flips the sign at every ply.
// * Node::w sums values from the point of view of the player who made the move
//   INTO the node (the parent's side to move), so a parent picks the child with
//   the highest Q = w / n.
// * Virtual loss: every node on a selected path gets vl += 1 until its leaf is
//   backed up; while in flight a visit counts as a loss of `virtual_loss` for the
//   player choosing it, Q = (w - virtual_loss * vl) / (n + vl), which steers
//   further selections of the same tree to other leaves.
// * A leaf whose evaluation is in flight is `pending`; a selection reaching it is
//   a collision: its virtual loss is reverted and the caller stops issuing leaves
//   for this tree until a result arrives.
// * Terminal leaves are valued exactly (terminal_value) and backed up at once.
// * Node storage is an arena (std::vector<Node> reserved once); children of a
//   node are contiguous, found by index. reset() keeps the capacity: no per-node
//   allocation during search.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "connect4.hpp"

namespace meeple::mcts {

// Sizes a search needs from a game; specialise for each game.
template <class G>
struct GameTraits;

template <>
struct GameTraits<c4::Connect4> {
  static constexpr int kNumActions = c4::kNumActions;     // policy vector length
  static constexpr int kMaxLegal = c4::kNumActions;       // most legal moves in a position
  static constexpr int kMaxGameLength = c4::kCells;       // most plies in a game
  static constexpr int kNumPlanes = c4::kNumPlanes;
  static constexpr int kObsHeight = c4::kHeight;
  static constexpr int kObsWidth = c4::kWidth;
  static constexpr int kObsSize = kNumPlanes * kObsHeight * kObsWidth;
};

// Small fast PRNG (xoshiro256**), seeded by splitmix64. Satisfies
// UniformRandomBitGenerator, so std::gamma_distribution can use it.
class Rng {
 public:
  using result_type = std::uint64_t;
  explicit Rng(std::uint64_t seed = 0) { seed_with(seed); }
  void seed_with(std::uint64_t seed) {
    for (auto& x : s_) x = splitmix64(seed);
  }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }
  result_type operator()() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  int below(int n) { return static_cast<int>(uniform() * n); }

  static std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Seed of the k-th stream derived from a base seed (independent streams per game).
  static std::uint64_t derive(std::uint64_t base, std::uint64_t k) {
    std::uint64_t x = base ^ (0xd1b54a32d192ed03ULL * (k + 1));
    splitmix64(x);
    return splitmix64(x);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

struct SearchParams {
  int num_simulations = 100;      // backed-up leaves below the root per move
  float c_puct = 1.5f;            // exploration constant of PUCT
  float dirichlet_alpha = 1.0f;   // root noise concentration
  float dirichlet_epsilon = 0.0f; // root prior mix: (1 - eps) * P + eps * Dir(alpha); 0 = off
  float virtual_loss = 1.0f;      // value counted against an in-flight visit
  float fpu_value = 0.0f;         // Q of a child never visited (first-play urgency)
};

struct Node {
  float prior = 0.0f;
  float w = 0.0f;             // value sum, view of the player moving into this node
  std::int32_t n = 0;         // completed visits
  std::int32_t first_child = -1;
  std::int32_t parent = -1;
  std::int16_t vl = 0;        // visits in flight (virtual loss count)
  std::uint16_t action = 0;   // action leading here from the parent
  std::uint16_t num_children = 0;
  std::uint8_t expanded = 0;
  std::uint8_t pending = 0;   // evaluation in flight
};

// Turns a raw network policy (logits or priors over all actions) into priors
// over the legal moves: out[i] for legal[i], summing to 1. Non-finite or
// non-positive totals fall back to uniform.
inline void legal_priors(const float* raw, const int* legal, int n, bool logits, float* out) {
  if (n <= 0) return;
  double total = 0.0;
  if (logits) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) mx = std::max(mx, raw[legal[i]]);
    if (std::isfinite(mx)) {
      for (int i = 0; i < n; ++i) {
        out[i] = std::exp(raw[legal[i]] - mx);
        total += out[i];
      }
    }
  } else {
    for (int i = 0; i < n; ++i) {
      const float p = raw[legal[i]];
      out[i] = (std::isfinite(p) && p > 0.0f) ? p : 0.0f;
      total += out[i];
    }
  }
  if (!(total > 0.0) || !std::isfinite(total)) {
    for (int i = 0; i < n; ++i) out[i] = 1.0f / static_cast<float>(n);
    return;
  }
  const float inv = static_cast<float>(1.0 / total);
  for (int i = 0; i < n; ++i) out[i] *= inv;
}

template <class G>
class Tree {
 public:
  using Traits = GameTraits<G>;
  static constexpr int A = Traits::kNumActions;

  enum class LeafKind { kTerminal, kNeedsEval, kCollision };
  struct Leaf {
    LeafKind kind;
    std::int32_t node;
    G state;  // the leaf's state (kNeedsEval)
  };

  explicit Tree(const SearchParams& params = {}) : params_(params) {}

  const SearchParams& params() const { return params_; }
  void set_params(const SearchParams& p) { params_ = p; }

  // Starts a search from `root`; keeps the arena's capacity.
  void reset(const G& root) {
    root_ = root;
    nodes_.clear();
    const std::size_t want = static_cast<std::size_t>(params_.num_simulations + 1) * Traits::kMaxLegal + 1;
    if (nodes_.capacity() < want) nodes_.reserve(want);
    nodes_.emplace_back();
    in_flight_ = 0;
  }

  const G& root_state() const { return root_; }
  const Node& node(std::int32_t i) const { return nodes_[i]; }
  const Node& root() const { return nodes_[0]; }
  std::size_t size() const { return nodes_.size(); }
  std::size_t capacity() const { return nodes_.capacity(); }
  int in_flight() const { return in_flight_; }
  // Backups through the root (its own evaluation included).
  int completed() const { return nodes_[0].n; }
  // Leaves issued so far (completed + in flight): the search stops issuing at
  // num_simulations + 1 (the root's own evaluation counts as the first).
  int issued() const { return nodes_[0].n + in_flight_; }
  bool wants_more() const { return issued() < params_.num_simulations + 1; }
  bool done() const { return in_flight_ == 0 && completed() >= params_.num_simulations + 1; }

  // Sum of the virtual-loss counters over all nodes (0 when nothing is in flight).
  long virtual_loss_total() const {
    long t = 0;
    for (const Node& nd : nodes_) t += nd.vl;
    return t;
  }

  // Descends from the root by PUCT, adding virtual loss on the path.
  // kTerminal: the leaf was terminal and is already backed up.
  // kNeedsEval: the leaf is now pending; call expand(leaf.node, ...) with its
  //   evaluation later (or abandon the tree).
  // kCollision: the path ended at a pending leaf; virtual loss was reverted.
  Leaf select() {
    std::int32_t idx = 0;
    G s = root_;
    for (;;) {
      Node& nd = nodes_[idx];
      ++nd.vl;
      if (nd.pending) {
        revert(idx);
        return {LeafKind::kCollision, idx, s};
      }
      if (!nd.expanded) {
        if (s.is_terminal()) {
          ++in_flight_;
          backup(idx, static_cast<float>(s.terminal_value()));
          return {LeafKind::kTerminal, idx, s};
        }
        nd.pending = 1;
        ++in_flight_;
        return {LeafKind::kNeedsEval, idx, s};
      }
      idx = best_child(nd);
      s.play(nodes_[idx].action);
    }
  }

  // Expands a pending leaf with priors over its legal moves (`priors[i]` for the
  // i-th legal move of `state`, in legal_moves order) and backs up `value`
  // (side to move's view). Root noise is mixed in when the root is expanded.
  void expand(std::int32_t idx, const G& state, const float* priors, float value, Rng* noise_rng) {
    int legal[Traits::kMaxLegal];
    const int n = state.legal_moves(legal);
    const auto first = static_cast<std::int32_t>(nodes_.size());
    for (int i = 0; i < n; ++i) {
      Node c;
      c.prior = priors[i];
      c.parent = idx;
      c.action = static_cast<std::uint16_t>(legal[i]);
      nodes_.push_back(c);
    }
    Node& nd = nodes_[idx];
    nd.first_child = first;
    nd.num_children = static_cast<std::uint16_t>(n);
    nd.expanded = 1;
    nd.pending = 0;
    if (idx == 0 && noise_rng != nullptr && params_.dirichlet_epsilon > 0.0f) add_root_noise(*noise_rng);
    backup(idx, value);
  }

  // Expands with a raw policy over all actions (logits or priors).
  void expand_raw(std::int32_t idx, const G& state, const float* raw, bool logits, float value, Rng* noise_rng) {
    int legal[Traits::kMaxLegal];
    float pri[Traits::kMaxLegal];
    const int n = state.legal_moves(legal);
    legal_priors(raw, legal, n, logits, pri);
    expand(idx, state, pri, value, noise_rng);
  }

  // Gives up a pending leaf without a result (reverts its path's virtual loss).
  void abandon(std::int32_t idx) {
    nodes_[idx].pending = 0;
    --in_flight_;
    revert(idx);
  }

  // Visit counts of the root's children over all actions (0 for illegal ones).
  void root_visits(float* out) const {
    std::fill(out, out + A, 0.0f);
    const Node& r = nodes_[0];
    for (int i = 0; i < r.num_children; ++i) {
      const Node& c = nodes_[r.first_child + i];
      out[c.action] = static_cast<float>(c.n);
    }
  }

  // Action from the root's visit counts: sampled with probability ~ n^(1/tau)
  // when temperature > 0, else the most visited (ties: higher Q, then lower action).
  int choose_action(float temperature, Rng& rng) const {
    const Node& r = nodes_[0];
    if (r.num_children == 0) return -1;
    if (temperature > 0.0f) {
      double weights[Traits::kMaxLegal];
      double total = 0.0;
      const double inv_tau = 1.0 / temperature;
      for (int i = 0; i < r.num_children; ++i) {
        const Node& c = nodes_[r.first_child + i];
        weights[i] = c.n > 0 ? std::pow(static_cast<double>(c.n), inv_tau) : 0.0;
        total += weights[i];
      }
      if (total > 0.0) {
        double u = rng.uniform() * total;
        for (int i = 0; i < r.num_children; ++i) {
          u -= weights[i];
          if (u < 0.0 && weights[i] > 0.0) return nodes_[r.first_child + i].action;
        }
        for (int i = r.num_children - 1; i >= 0; --i)
          if (weights[i] > 0.0) return nodes_[r.first_child + i].action;
      }
    }
    int best = 0;
    for (int i = 1; i < r.num_children; ++i) {
      const Node& c = nodes_[r.first_child + i];
      const Node& b = nodes_[r.first_child + best];
      if (c.n > b.n || (c.n == b.n && c.n > 0 && c.w / c.n > b.w / b.n)) best = i;
    }
    return nodes_[r.first_child + best].action;
  }

  // Random playout value from `s` for its side to move (a cheap evaluator).
  static float rollout(G s, Rng& rng) {
    const int me = s.to_play();
    int legal[Traits::kMaxLegal];
    while (!s.is_terminal()) {
      const int n = s.legal_moves(legal);
      s.play(legal[rng.below(n)]);
    }
    const float v = static_cast<float>(s.terminal_value());
    return s.to_play() == me ? v : -v;
  }

 private:
  std::int32_t best_child(const Node& nd) const {
    const float sqrt_n = std::sqrt(static_cast<float>(std::max(nd.n + nd.vl, 1)));
    const float cu = params_.c_puct * sqrt_n;
    std::int32_t best = nd.first_child;
    float best_score = -std::numeric_limits<float>::infinity();
    const std::int32_t end = nd.first_child + nd.num_children;
    for (std::int32_t i = nd.first_child; i < end; ++i) {
      const Node& c = nodes_[i];
      const int visits = c.n + c.vl;
      const float q = visits > 0 ? (c.w - params_.virtual_loss * c.vl) / static_cast<float>(visits)
                                 : params_.fpu_value;
      const float score = q + cu * c.prior / static_cast<float>(1 + visits);
      if (score > best_score) {
        best_score = score;
        best = i;
      }
    }
    return best;
  }

  // Completes one in-flight visit of `idx` with `value` (view of its side to move).
  void backup(std::int32_t idx, float value) {
    float v = value;
    while (idx >= 0) {
      Node& nd = nodes_[idx];
      --nd.vl;
      ++nd.n;
      nd.w -= v;  // view of the player who moved into nd
      v = -v;
      idx = nd.parent;
    }
    --in_flight_;
  }

  void revert(std::int32_t idx) {
    while (idx >= 0) {
      --nodes_[idx].vl;
      idx = nodes_[idx].parent;
    }
  }

  void add_root_noise(Rng& rng) {
    Node& r = nodes_[0];
    if (r.num_children == 0) return;
    std::gamma_distribution<double> gamma(params_.dirichlet_alpha, 1.0);
    double noise[Traits::kMaxLegal];
    double total = 0.0;
    for (int i = 0; i < r.num_children; ++i) total += (noise[i] = gamma(rng));
    if (!(total > 0.0)) return;
    const float eps = params_.dirichlet_epsilon;
    for (int i = 0; i < r.num_children; ++i) {
      Node& c = nodes_[r.first_child + i];
      c.prior = (1.0f - eps) * c.prior + eps * static_cast<float>(noise[i] / total);
    }
  }

  SearchParams params_;
  G root_;
  std::vector<Node> nodes_;
  int in_flight_ = 0;
};

}  // namespace meeple::mcts
