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
  // Gumbel root (Danihelka et al., "Policy improvement by planning with Gumbel", ICLR 2022):
  // the root samples Gumbel(0) noise g, considers the top `gumbel_considered` moves by
  // g + logit and splits the simulations between them by sequential halving; the move
  // played is the survivor and the policy target is softmax(logit + sigma(completed Q)).
  // Interior nodes keep PUCT. Dirichlet noise is not used at a Gumbel root; self-play draws
  // the Gumbel noise for the first temperature_moves plies only (greedy after, as with PUCT).
  bool gumbel = false;
  int gumbel_considered = 16;     // m: moves considered at the root (capped by the legal moves)
  float gumbel_c_visit = 50.0f;   // sigma(q) = (c_visit + max_b N(b)) * c_scale * q, q rescaled to [0, 1]
  float gumbel_c_scale = 1.0f;
  // Value of a position = discount * (value after the move), so with discount < 1 a faster
  // win (and a slower loss) is worth more; 1 = the plain game result.
  float discount = 1.0f;
};

// Simulations-per-move schedule of sequential halving: entry k is the visit count that
// the k-th root simulation brings a considered move up from. Each round gives every
// remaining move max(1, floor(n / (ceil(log2 m) * remaining))) visits, then halves the
// remaining moves (never below 2).
inline std::vector<int> sequential_halving_visits(int m, int n) {
  std::vector<int> seq;
  seq.reserve(static_cast<std::size_t>(std::max(n, 0)));
  if (m <= 1) {
    for (int k = 0; k < n; ++k) seq.push_back(k);
    return seq;
  }
  int rounds = 0;
  while ((1 << rounds) < m) ++rounds;
  std::vector<int> visits(static_cast<std::size_t>(m), 0);
  int remaining = m;
  while (static_cast<int>(seq.size()) < n) {
    const int extra = std::max(1, n / (rounds * remaining));
    for (int e = 0; e < extra; ++e) {
      for (int i = 0; i < remaining; ++i) seq.push_back(visits[static_cast<std::size_t>(i)]);
      for (int i = 0; i < remaining; ++i) ++visits[static_cast<std::size_t>(i)];
    }
    remaining = std::max(2, remaining / 2);
  }
  seq.resize(static_cast<std::size_t>(n));
  return seq;
}

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
    gumbel_m_ = 0;
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
      idx = (idx == 0 && gumbel_m_ > 0) ? gumbel_root_child() : best_child(nd);
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
    if (idx == 0 && params_.gumbel) {
      init_gumbel_root(value, noise_rng);
    } else if (idx == 0 && noise_rng != nullptr && params_.dirichlet_epsilon > 0.0f) {
      add_root_noise(*noise_rng);
    }
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

  // The policy a network learns from this search, over all actions (0 for illegal ones):
  // the visit distribution, or at a Gumbel root softmax(logit + sigma(completed Q)).
  void policy_target(float* out) const {
    const Node& r = nodes_[0];
    std::fill(out, out + A, 0.0f);
    if (r.num_children == 0) return;
    if (gumbel_m_ > 0) {
      float sigma[Traits::kMaxLegal];
      gumbel_sigma(sigma);
      float mx = -std::numeric_limits<float>::infinity();
      for (int i = 0; i < r.num_children; ++i) mx = std::max(mx, logit_[i] + sigma[i]);
      double total = 0.0;
      for (int i = 0; i < r.num_children; ++i) total += std::exp(static_cast<double>(logit_[i] + sigma[i] - mx));
      for (int i = 0; i < r.num_children; ++i) {
        const Node& c = nodes_[r.first_child + i];
        out[c.action] = static_cast<float>(std::exp(static_cast<double>(logit_[i] + sigma[i] - mx)) / total);
      }
      return;
    }
    float total = 0.0f;
    for (int i = 0; i < r.num_children; ++i) total += static_cast<float>(nodes_[r.first_child + i].n);
    if (!(total > 0.0f)) return;
    for (int i = 0; i < r.num_children; ++i) {
      const Node& c = nodes_[r.first_child + i];
      out[c.action] = static_cast<float>(c.n) / total;
    }
  }

  // Action from the root's visit counts: sampled with probability ~ n^(1/tau)
  // when temperature > 0, else the most visited (ties: higher Q, then lower action).
  // A Gumbel root ignores the temperature: its Gumbel noise already samples, and the move
  // is the survivor of sequential halving (most visited, then highest g + logit + sigma).
  int choose_action(float temperature, Rng& rng) const {
    const Node& r = nodes_[0];
    if (r.num_children == 0) return -1;
    if (gumbel_m_ > 0) return nodes_[r.first_child + gumbel_final_child()].action;
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
    const float d = params_.discount;
    while (idx >= 0) {
      Node& nd = nodes_[idx];
      --nd.vl;
      ++nd.n;
      v = -d * v;  // view of the player who moved into nd
      nd.w += v;
      idx = nd.parent;
    }
    --in_flight_;
  }

  // ---- Gumbel root (SearchParams::gumbel)
  void init_gumbel_root(float value, Rng* rng) {
    const Node& r = nodes_[0];
    const int n = r.num_children;
    root_value_ = value;
    int order[Traits::kMaxLegal];
    for (int i = 0; i < n; ++i) {
      logit_[i] = std::log(std::max(nodes_[r.first_child + i].prior, 1e-30f));
      // Gumbel(0, 1) = -log(-log U); no noise without a generator (evaluation play).
      gumbel_[i] = rng != nullptr ? static_cast<float>(-std::log(-std::log(std::max(rng->uniform(), 1e-300)))) : 0.0f;
      order[i] = i;
    }
    std::sort(order, order + n, [&](int a, int b) { return gumbel_[a] + logit_[a] > gumbel_[b] + logit_[b]; });
    gumbel_m_ = std::max(1, std::min(params_.gumbel_considered, n));
    for (int i = 0; i < n; ++i) considered_[i] = 0;
    for (int i = 0; i < gumbel_m_; ++i) considered_[order[i]] = 1;
    halving_ = sequential_halving_visits(gumbel_m_, params_.num_simulations);
  }

  // sigma(completed Q) of every root child (index order). A child without a visit takes
  // the mixed value of the root network's value and the prior-weighted Q of visited children.
  void gumbel_sigma(float* sigma) const {
    const Node& r = nodes_[0];
    const int n = r.num_children;
    double sum_n = 0.0, sum_p = 0.0, sum_pq = 0.0;
    int max_n = 0;
    for (int i = 0; i < n; ++i) {
      const Node& c = nodes_[r.first_child + i];
      if (c.n <= 0) continue;
      sum_n += c.n;
      sum_p += c.prior;
      sum_pq += static_cast<double>(c.prior) * c.w / c.n;
      max_n = std::max(max_n, c.n);
    }
    double v_mix = root_value_;
    if (sum_n > 0.0 && sum_p > 0.0) v_mix = (root_value_ + sum_n * sum_pq / sum_p) / (1.0 + sum_n);
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int i = 0; i < n; ++i) {
      const Node& c = nodes_[r.first_child + i];
      sigma[i] = c.n > 0 ? c.w / static_cast<float>(c.n) : static_cast<float>(v_mix);
      lo = std::min(lo, sigma[i]);
      hi = std::max(hi, sigma[i]);
    }
    const float scale = (params_.gumbel_c_visit + static_cast<float>(max_n)) * params_.gumbel_c_scale;
    const float span = std::max(hi - lo, 1e-8f);
    for (int i = 0; i < n; ++i) sigma[i] = scale * (sigma[i] - lo) / span;
  }

  // The root child the next simulation goes to: a considered move whose visits (in flight
  // included) equal the schedule's entry, best by g + logit + sigma; with none at that
  // count (results still in flight), the least visited considered move.
  std::int32_t gumbel_root_child() const {
    const Node& r = nodes_[0];
    const int k = std::max(0, r.n - 1 + in_flight_);
    const int target = halving_.empty() ? 0 : halving_[std::min<std::size_t>(k, halving_.size() - 1)];
    float sigma[Traits::kMaxLegal];
    gumbel_sigma(sigma);
    int best = -1, fallback = -1, fallback_visits = std::numeric_limits<int>::max();
    float best_score = -std::numeric_limits<float>::infinity(), fallback_score = best_score;
    for (int i = 0; i < r.num_children; ++i) {
      if (!considered_[i]) continue;
      const Node& c = nodes_[r.first_child + i];
      const int visits = c.n + c.vl;
      const float score = gumbel_[i] + logit_[i] + sigma[i];
      if (visits == target && score > best_score) {
        best_score = score;
        best = i;
      }
      if (visits < fallback_visits || (visits == fallback_visits && score > fallback_score)) {
        fallback_visits = visits;
        fallback_score = score;
        fallback = i;
      }
    }
    return r.first_child + (best >= 0 ? best : fallback);
  }

  // Index of the root child sequential halving ends with.
  int gumbel_final_child() const {
    const Node& r = nodes_[0];
    float sigma[Traits::kMaxLegal];
    gumbel_sigma(sigma);
    int max_n = -1;
    for (int i = 0; i < r.num_children; ++i)
      if (considered_[i]) max_n = std::max(max_n, nodes_[r.first_child + i].n);
    int best = -1;
    float best_score = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < r.num_children; ++i) {
      if (!considered_[i] || nodes_[r.first_child + i].n != max_n) continue;
      const float score = gumbel_[i] + logit_[i] + sigma[i];
      if (best < 0 || score > best_score) {
        best_score = score;
        best = i;
      }
    }
    return best;
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
  // Gumbel root state (gumbel_m_ > 0 once the root is expanded with params_.gumbel)
  int gumbel_m_ = 0;
  float root_value_ = 0.0f;
  float logit_[Traits::kMaxLegal];
  float gumbel_[Traits::kMaxLegal];
  std::uint8_t considered_[Traits::kMaxLegal];
  std::vector<int> halving_;
};

}  // namespace meeple::mcts
