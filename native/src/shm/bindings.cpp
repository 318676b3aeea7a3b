// meeple_native._core.shm: the hot loops of the shared-memory transport (docs/protocol.md
// section 4) in native code. meeple.transport.shm binds these once per channel and worker
// and keeps its Python path for installs without them; what each does is said there.
// Why native: a 1-env shm round trip was ~6 us of Python on both sides around a ~0.5 us
// floor (docs/transport.md); the waits, the ring and the publish are most of that.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "shm/wait.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace shm = meeple::shm;

namespace {

constexpr double kSliceS = 0.01;  // a futex wait wakes this often to ask whether the peer lives

[[noreturn]] void raise(PyObject* type, const std::string& text) {
  PyErr_SetString(type, text.c_str());
  throw nb::python_error();
}

// A writable buffer (the segment's mmap) held for as long as an object uses its memory:
// the mapping cannot be closed under us (mmap.close raises BufferError while it is held).
class Mapped {
 public:
  explicit Mapped(nb::handle obj) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_WRITABLE) != 0) throw nb::python_error();
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  ~Mapped() { PyBuffer_Release(&view_); }

  template <typename T>
  T* at(size_t offset, const char* what) const {
    if (offset % alignof(T) != 0 || offset + sizeof(T) > static_cast<size_t>(view_.len)) {
      raise(PyExc_ValueError, std::string(what) + ": offset " + std::to_string(offset) +
                                  " is outside the " + std::to_string(view_.len) +
                                  "-byte buffer or not aligned to " +
                                  std::to_string(alignof(T)));
    }
    return reinterpret_cast<T*>(static_cast<char*>(view_.buf) + offset);
  }

  const uint8_t* bytes(size_t offset, size_t n, const char* what) const {
    if (n == 0 || offset + n > static_cast<size_t>(view_.len)) {
      raise(PyExc_ValueError, std::string(what) + ": " + std::to_string(n) + " bytes at offset " +
                                  std::to_string(offset) + " are not inside the " +
                                  std::to_string(view_.len) + "-byte buffer");
    }
    return static_cast<const uint8_t*>(view_.buf) + offset;
  }

  std::vector<uint32_t*> words(const std::vector<size_t>& offsets, const char* what) const {
    std::vector<uint32_t*> out;
    out.reserve(offsets.size());
    for (size_t o : offsets) out.push_back(at<uint32_t>(o, what));
    return out;
  }

 private:
  Py_buffer view_{};
};

// Garbage-collector slots for a class holding one Python callable (`held()`): the callable
// may refer back to the object's owner (a waiter's liveness check, a worker loop's env
// step), and the collector must see through it to free such cycles.
template <typename T>
int traverse_held(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  Py_VISIT(nb::inst_ptr<T>(self)->held().ptr());
  return 0;
}

template <typename T>
int clear_held(PyObject* self) {
  nb::inst_ptr<T>(self)->held() = nb::none();
  return 0;
}

template <typename T>
PyType_Slot* gc_slots() {
  static PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(traverse_held<T>)},
                                {Py_tp_clear, reinterpret_cast<void*>(clear_held<T>)},
                                {0, nullptr}};
  return slots;
}

// meeple.transport.waiting.WordWaiter with the same phases, budget and errors: the pure
// spin holds the GIL (it is microseconds); yielding and blocking release it.
class WordWaiter {
 public:
  WordWaiter(nb::handle buffer, size_t offset, size_t sleeping_offset, bool changed,
             double spin_us, double yield_us, double timeout_s, nb::object alive)
      : mapped_(buffer),
        watch_{mapped_.at<uint32_t>(offset, "word"),
               mapped_.at<uint32_t>(sleeping_offset, "sleeping"), changed},
        spin_s_(spin_us * 1e-6),
        yield_s_(yield_us * 1e-6),
        timeout_s_(timeout_s),
        alive_(std::move(alive)) {}

  uint32_t wait(uint32_t value) {
    uint32_t w = shm::load(watch_.word);
    if (watch_.ready(w, value)) return w;
    auto [spin, scale] = budget_.next_scales();
    const double start = shm::now_s();
    const double spin_end = start + spin_s_ * spin;
    if (spin > 0.0 && watch_.spin_until(value, spin_end, w)) {
      budget_.spun();
      ++ended_[0];
      return w;
    }
    const double yield_end = spin_end + yield_s_ * scale;
    bool yielded;
    {
      nb::gil_scoped_release unlocked;
      yielded = watch_.yield_until(value, yield_end, w);
    }
    if (yielded) {
      budget_.yielded();
      ++ended_[1];
      return w;
    }
    return block(value, start);
  }

  shm::SpinBudget& budget() { return budget_; }
  // How many waits ended in each phase (spin, yield, futex); ready at once: not counted.
  std::tuple<uint64_t, uint64_t, uint64_t> ended() const {
    return {ended_[0], ended_[1], ended_[2]};
  }

  nb::object& held() { return alive_; }  // see gc_slots

 private:
  uint32_t block(uint32_t value, double start) {
    const double deadline = start + timeout_s_;  // inf: a worker waits for its client forever
    while (true) {
      uint32_t w;
      bool ready;
      {
        nb::gil_scoped_release unlocked;
        ready = watch_.block_once(value, kSliceS, w);
      }
      if (ready) {
        budget_.blocked(shm::now_s() - start <= spin_s_ + yield_s_);
        ++ended_[2];
        return w;
      }
      if (!alive_.is_none()) {
        nb::object gone = alive_();
        if (!gone.is_none()) raise(PyExc_ConnectionError, nb::cast<std::string>(nb::str(gone)));
      }
      if (shm::now_s() > deadline) {
        char text[64];
        std::snprintf(text, sizeof text, "no answer within %.1f s", deadline - start);
        raise(PyExc_TimeoutError, text);
      }
    }
  }

  Mapped mapped_;
  shm::Watch watch_;
  double spin_s_, yield_s_, timeout_s_;
  nb::object alive_;
  shm::SpinBudget budget_;
  uint64_t ended_[3] = {0, 0, 0};
};

// The client's ring of one worker: its slots' req_seq, then its doorbell (a futex wake if
// it sleeps). Returns the request's seq.
class Ring {
 public:
  Ring(nb::handle buffer, const std::vector<size_t>& req_seq_offsets, size_t doorbell_offset,
       size_t sleeping_offset)
      : mapped_(buffer),
        req_seq_(mapped_.words(req_seq_offsets, "req_seq")),
        doorbell_(mapped_.at<uint32_t>(doorbell_offset, "doorbell")),
        sleeping_(mapped_.at<uint32_t>(sleeping_offset, "sleeping")) {}

  uint32_t operator()() {
    const uint32_t seq = shm::load(doorbell_) + 1;
    for (uint32_t* w : req_seq_) shm::store(w, seq);
    shm::store_fenced(doorbell_, seq);  // then look at its sleeping flag (see store_fenced)
    if (shm::load(sleeping_)) shm::futex_wake(doorbell_);
    return seq;
  }

 private:
  Mapped mapped_;
  std::vector<uint32_t*> req_seq_;
  uint32_t* doorbell_;
  uint32_t* sleeping_;
};

// STEP of one worker's one-seat slots: write the actions, ring, wait. Returns true when the
// caller must look further: the worker's error word is set, or the periodic server check
// is due (every `liveness_every` requests).
class OneWorkerStep {
 public:
  OneWorkerStep(nb::handle buffer, const std::vector<size_t>& action_offsets, Ring& ring,
                WordWaiter& reply, size_t error_offset, uint64_t liveness_every)
      : mapped_(buffer),
        actions_(mapped_.words(action_offsets, "action")),
        ring_(ring),
        reply_(reply),
        error_(mapped_.at<uint32_t>(error_offset, "error")),
        liveness_every_(liveness_every ? liveness_every : 1) {}

  bool operator()(nb::handle actions) {
    Py_buffer a;
    if (PyObject_GetBuffer(actions.ptr(), &a, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
      throw nb::python_error();
    const bool ok = a.itemsize == 4 && a.format != nullptr &&
                    std::strchr("il", a.format[std::strlen(a.format) - 1]) != nullptr &&
                    static_cast<size_t>(a.len) == 4 * actions_.size();
    if (ok) {
      const auto* src = static_cast<const int32_t*>(a.buf);
      for (size_t i = 0; i < actions_.size(); ++i)
        shm::store(actions_[i], static_cast<uint32_t>(src[i]));
    }
    PyBuffer_Release(&a);
    if (!ok) {
      raise(PyExc_TypeError, "actions: expected " + std::to_string(actions_.size()) +
                                 " contiguous int32 values");
    }
    reply_.wait(ring_());
    const bool check_server = ++requests_ % liveness_every_ == 0;
    return check_server || (shm::load(error_) & 0xFFFF) != 0;  // the u16 error code
  }

 private:
  Mapped mapped_;
  std::vector<uint32_t*> actions_;
  Ring& ring_;
  WordWaiter& reply_;
  uint32_t* error_;
  uint64_t liveness_every_;
  uint64_t requests_ = 0;
};

// The worker's answer: its slots' resp_seq, its step and env-error counters, then its done
// word (a futex wake if the client sleeps).
class Publisher {
 public:
  Publisher(nb::handle buffer, const std::vector<size_t>& resp_seq_offsets, size_t steps_offset,
            size_t env_errors_offset, size_t done_offset, size_t sleeping_offset)
      : mapped_(buffer),
        resp_seq_(mapped_.words(resp_seq_offsets, "resp_seq")),
        steps_(mapped_.at<uint64_t>(steps_offset, "steps")),
        env_errors_(mapped_.at<uint32_t>(env_errors_offset, "env_errors")),
        done_(mapped_.at<uint32_t>(done_offset, "done")),
        sleeping_(mapped_.at<uint32_t>(sleeping_offset, "sleeping")) {}

  void operator()(uint32_t seq, uint64_t steps, uint32_t env_errors) {
    for (uint32_t* w : resp_seq_) shm::store(w, seq);
    __atomic_store_n(steps_, steps, __ATOMIC_RELAXED);  // statistics: read by the server only
    shm::store(env_errors_, env_errors);
    shm::store_fenced(done_, seq);
    if (shm::load(sleeping_)) shm::futex_wake(done_);
  }

 private:
  Mapped mapped_;
  std::vector<uint32_t*> resp_seq_;
  uint64_t* steps_;
  uint32_t* env_errors_;
  uint32_t* done_;
  uint32_t* sleeping_;
};

// A worker's STEPs in native code, around the env's own (Python) step: wait for the
// doorbell, check the actions against the masks the last request left in the slots, call
// `env_step()` (the env's step bound to the slots' actions and records), publish. Anything
// else goes back to the worker's Python loop (see serve()).
class StepLoop {
 public:
  enum Kind { kHandle = 0, kEnvRaised = 1, kServerGone = 2 };

  StepLoop(nb::handle buffer, WordWaiter& requests, Publisher& publish, size_t command_offset,
           const std::vector<size_t>& action_offsets, const std::vector<size_t>& mask_offsets,
           uint32_t num_actions, nb::object env_step, uint32_t server_pid,
           uint32_t liveness_every)
      : mapped_(buffer),
        requests_(requests),
        publish_(publish),
        command_(mapped_.at<uint8_t>(command_offset, "command")),
        actions_(mapped_.words(action_offsets, "action")),
        num_actions_(num_actions),
        env_step_(std::move(env_step)),
        server_pid_(static_cast<pid_t>(server_pid)),
        liveness_every_(liveness_every ? liveness_every : 1) {
    if (action_offsets.size() != mask_offsets.size())
      raise(PyExc_ValueError, "one mask per action expected");
    for (size_t o : mask_offsets) masks_.push_back(mapped_.bytes(o, num_actions, "mask"));
  }

  // Serves requests after `last` while they are STEPs it may serve (`armed`: the masks in the
  // slots are the legal actions, as after any request answered without error). Returns
  // (kind, seq, steps, error): kHandle: request `seq` is the Python loop's to answer;
  // kEnvRaised: env_step raised `error` on request `seq` (unanswered); kServerGone.
  // `steps` counts the env steps taken, from the `steps` given.
  std::tuple<int, uint32_t, uint64_t, nb::object> serve(uint32_t last, uint64_t steps,
                                                        uint32_t env_errors, bool armed,
                                                        uint8_t step_command) {
    while (true) {
      const uint32_t seq = requests_.wait(last);
      if (++served_ % liveness_every_ == 0 && getppid() != server_pid_)
        return {kServerGone, seq, steps, nb::none()};
      if (!armed || __atomic_load_n(command_, __ATOMIC_ACQUIRE) != step_command || !legal())
        return {kHandle, seq, steps, nb::none()};
      try {
        env_step_();
      } catch (nb::python_error& err) {
        return {kEnvRaised, seq, steps, nb::borrow(err.value())};
      }
      steps += actions_.size();
      publish_(seq, steps, env_errors);
      last = seq;
    }
  }

  nb::object& held() { return env_step_; }  // see gc_slots

 private:
  bool legal() const {
    for (size_t i = 0; i < actions_.size(); ++i) {
      const uint32_t a = shm::load(actions_[i]);  // negative int32 values wrap to huge ones
      if (a >= num_actions_ || masks_[i][a] == 0) return false;
    }
    return true;
  }

  Mapped mapped_;
  WordWaiter& requests_;
  Publisher& publish_;
  const uint8_t* command_;
  std::vector<uint32_t*> actions_;
  std::vector<const uint8_t*> masks_;
  uint32_t num_actions_;
  nb::object env_step_;
  pid_t server_pid_;
  uint64_t liveness_every_;
  uint64_t served_ = 0;
};

}  // namespace

void bind_shm(nb::module_& parent) {
  nb::module_ m = parent.def_submodule(
      "shm", "Hot loops of the shared-memory transport (used by meeple.transport.shm).");

  nb::class_<shm::SpinBudget>(m, "SpinBudget",
                              "meeple.transport.waiting.SpinBudget's rules, as the native "
                              "waiters use them (exposed to test that the two agree).")
      .def(nb::init<>())
      .def_ro("scale", &shm::SpinBudget::scale)
      .def_ro("spin", &shm::SpinBudget::spin)
      .def_ro("waits", &shm::SpinBudget::waits)
      .def("spun", &shm::SpinBudget::spun)
      .def("yielded", &shm::SpinBudget::yielded)
      .def("blocked", &shm::SpinBudget::blocked, "within_budget"_a = false)
      .def("next_scales", &shm::SpinBudget::next_scales);

  nb::class_<WordWaiter>(m, "WordWaiter",
                         "Waits on the u32 at `offset` of `buffer` (see "
                         "meeple.transport.waiting.WordWaiter, whose rules it follows).",
                         nb::type_slots(gc_slots<WordWaiter>()))
      .def(nb::init<nb::handle, size_t, size_t, bool, double, double, double, nb::object>(),
           "buffer"_a, "offset"_a, "sleeping_offset"_a, "changed"_a, "spin_us"_a,
           "yield_us"_a, "timeout_s"_a, "alive"_a = nb::none())
      .def("wait", &WordWaiter::wait, "value"_a)
      .def_prop_ro("budget", &WordWaiter::budget, nb::rv_policy::reference_internal)
      .def_prop_ro("ended", &WordWaiter::ended,
                   "How many waits ended while spinning, yielding and on the futex "
                   "(waits whose word was ready at once are not counted).");

  nb::class_<Ring>(m, "Ring", "Hands one worker the next request; returns its seq.")
      .def(nb::init<nb::handle, const std::vector<size_t>&, size_t, size_t>(), "buffer"_a,
           "req_seq_offsets"_a, "doorbell_offset"_a, "sleeping_offset"_a)
      .def("__call__", &Ring::operator());

  nb::class_<OneWorkerStep>(m, "OneWorkerStep",
                            "STEP of one worker's one-seat slots; True when the caller must "
                            "look at the worker's error or the server.")
      .def(nb::init<nb::handle, const std::vector<size_t>&, Ring&, WordWaiter&, size_t,
                    uint64_t>(),
           "buffer"_a, "action_offsets"_a, "ring"_a, "reply"_a, "error_offset"_a,
           "liveness_every"_a, nb::keep_alive<1, 4>(), nb::keep_alive<1, 5>())
      .def("__call__", &OneWorkerStep::operator(), "actions"_a);

  nb::class_<Publisher>(m, "Publisher", "A worker's answer to the request `seq`.")
      .def(nb::init<nb::handle, const std::vector<size_t>&, size_t, size_t, size_t, size_t>(),
           "buffer"_a, "resp_seq_offsets"_a, "steps_offset"_a, "env_errors_offset"_a,
           "done_offset"_a, "sleeping_offset"_a)
      .def("__call__", &Publisher::operator(), "seq"_a, "steps"_a, "env_errors"_a);

  nb::class_<StepLoop>(m, "StepLoop", "A worker's STEPs: wait, check, env_step(), publish.",
                       nb::type_slots(gc_slots<StepLoop>()))
      .def(nb::init<nb::handle, WordWaiter&, Publisher&, size_t, const std::vector<size_t>&,
                    const std::vector<size_t>&, uint32_t, nb::object, uint32_t, uint32_t>(),
           "buffer"_a, "requests"_a, "publish"_a, "command_offset"_a, "action_offsets"_a,
           "mask_offsets"_a, "num_actions"_a, "env_step"_a, "server_pid"_a, "liveness_every"_a,
           nb::keep_alive<1, 3>(), nb::keep_alive<1, 4>())
      .def("serve", &StepLoop::serve, "last"_a, "steps"_a, "env_errors"_a, "armed"_a,
           "step_command"_a);
}
