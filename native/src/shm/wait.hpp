// Waiting on a u32 word of shared memory, the native twin of meeple.transport.waiting:
// spin, then spin with sched_yield, then futex, with the same adaptive spin budget.
// Plain C++17 and Linux system calls; no Python here (shm/bindings.cpp adds the GIL,
// the liveness callback and the exceptions).
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <utility>

namespace meeple::shm {

inline uint32_t load(const uint32_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
inline void store(uint32_t* word, uint32_t value) { __atomic_store_n(word, value, __ATOMIC_RELEASE); }
// A store the next load may not pass: "set my sleeping flag, then look at the word" must
// not be reordered, or both sides could miss each other's write (x86 reorders store-load).
inline void store_fenced(uint32_t* word, uint32_t value) {
  __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline void futex_wait(uint32_t* word, uint32_t expected, double timeout_s) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout_s);
  ts.tv_nsec = static_cast<long>((timeout_s - static_cast<double>(ts.tv_sec)) * 1e9);
  syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void futex_wake(uint32_t* word) {
  syscall(SYS_futex, word, FUTEX_WAKE, 1 << 30, nullptr, nullptr, 0);
}

// The rules of meeple.transport.waiting.SpinBudget (its docstring says why), kept equal to
// them by tests/transport/test_native_wait.py.
struct SpinBudget {
  static constexpr double kMin = 1.0 / 16;
  static constexpr uint64_t kProbeEvery = 64;
  double scale = 1.0;  // spin + yield phases
  double spin = 1.0;   // the pure spin phase
  uint64_t waits = 0;
  bool probe = false, spin_probe = false;

  static double grow(double s) { return std::min(1.0, std::max(s * 2, kMin)); }
  static double shrink(double s) { return s > kMin ? s / 2 : 0.0; }

  void spun() {
    if (scale == 1.0 && spin == 1.0) return;
    scale = probe ? 1.0 : grow(scale);
    spin = spin_probe ? 1.0 : grow(spin);
  }
  void yielded() {
    scale = probe ? 1.0 : grow(scale);
    spin = shrink(spin);
  }
  void blocked(bool within_budget) {
    if (within_budget) {
      yielded();
    } else {
      scale = shrink(scale);
      spin = shrink(spin);
    }
  }
  double next_scale() {
    ++waits;
    probe = scale == 0.0 && waits % kProbeEvery == 0;
    spin_probe = spin == 0.0 && waits % kProbeEvery == 0;
    return probe ? 1.0 : scale;
  }
  std::pair<double, double> next_scales() {
    if (scale == 1.0 && spin == 1.0) {
      ++waits;
      probe = spin_probe = false;
      return {1.0, 1.0};
    }
    double s = next_scale();
    return {std::min(spin_probe ? 1.0 : spin, s), s};
  }
};

// One watched word and its waiter's sleeping flag. `changed`: wait until the word differs
// from a value (a worker's doorbell), else until it equals it (a client's done word).
struct Watch {
  uint32_t* word;
  uint32_t* sleeping;
  bool changed;

  bool ready(uint32_t w, uint32_t value) const { return (w != value) == changed; }

  // The pure spin phase: the word if it became ready before `end`, else false.
  bool spin_until(uint32_t value, double end, uint32_t& out) const {
    do {
      for (int i = 0; i < 8; ++i) {  // a clock read (~20 ns) every few turns
        uint32_t w = load(word);
        if (ready(w, value)) {
          out = w;
          return true;
        }
        cpu_relax();
      }
    } while (now_s() < end);
    return false;
  }

  bool yield_until(uint32_t value, double end, uint32_t& out) const {
    while (now_s() < end) {
      sched_yield();
      uint32_t w = load(word);
      if (ready(w, value)) {
        out = w;
        return true;
      }
    }
    return false;
  }

  // One futex slice with the sleeping flag up; true (and the word) if it became ready.
  bool block_once(uint32_t value, double slice_s, uint32_t& out) const {
    store_fenced(sleeping, 1);
    uint32_t w = load(word);
    if (!ready(w, value)) {
      futex_wait(word, w, slice_s);
      w = load(word);
    }
    store_fenced(sleeping, 0);
    out = w;
    return ready(w, value);
  }
};

}  // namespace meeple::shm
