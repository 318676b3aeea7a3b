// Python bindings of the observation encoders (docs/mahjong_encoding.md).
#include <nanobind/ndarray.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "actions.hpp"
#include "bind_parts.hpp"
#include "encode.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace meeple::mj {
namespace {

using Encoder = void (*)(const Game&, int, float*);

void check_seat(int seat, const char* fn) {
  if (seat < 0 || seat > 3) throw nb::value_error((std::string(fn) + ": seat must be in 0..3, got " + std::to_string(seat)).c_str());
}

std::string accepted(const char* fn, int planes) {
  return std::string(fn) + ": out must be a writable C-contiguous float32 CPU array (numpy or torch) of shape (" +
         std::to_string(planes) + ", 34) or (" + std::to_string(planes * kPlaneWidth) + ",)";
}

bool shape_ok(size_t ndim, size_t d0, size_t d1, int planes) {
  return (ndim == 2 && d0 == static_cast<size_t>(planes) && d1 == kPlaneWidth) ||
         (ndim == 1 && d0 == static_cast<size_t>(planes * kPlaneWidth));
}

// The fast path: a float32 C-contiguous CPU array, taken without conversion (a converted
// copy would silently receive the observation); anything else goes to checked_out, which
// explains what is accepted.
using OutArray = nb::ndarray<float, nb::c_contig, nb::device::cpu>;

bool try_fast(nb::handle h, int planes, float** data) {
  OutArray arr;
  if (!nb::try_cast(h, arr, false)) return false;
  if (!shape_ok(arr.ndim(), arr.ndim() ? arr.shape(0) : 0, arr.ndim() > 1 ? arr.shape(1) : 0, planes)) return false;
  *data = arr.data();
  return true;
}

// The caller's buffer after checking dtype, device, shape and contiguity.
float* checked_out(nb::handle out, const char* fn, int planes) {
  nb::ndarray<> arr;
  if (!nb::try_cast(out, arr))
    throw nb::type_error((accepted(fn, planes) + "; got " + nb::type_name(out.type()).c_str() +
                          " (read-only arrays are refused too)").c_str());
  if (arr.dtype() != nb::dtype<float>()) throw nb::type_error((accepted(fn, planes) + "; got another dtype").c_str());
  if (arr.device_type() != nb::device::cpu::value)
    throw nb::type_error((accepted(fn, planes) + "; got a non-CPU array").c_str());
  if (!shape_ok(arr.ndim(), arr.ndim() ? arr.shape(0) : 0, arr.ndim() > 1 ? arr.shape(1) : 0, planes)) {
    std::string shape = "(";
    for (size_t i = 0; i < arr.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(arr.shape(i));
    shape += arr.ndim() == 1 ? ",)" : ")";
    throw nb::value_error((accepted(fn, planes) + "; got shape " + shape).c_str());
  }
  int64_t expect = 1;
  for (size_t i = arr.ndim(); i-- > 0;) {
    if (arr.shape(i) > 1 && arr.stride(i) != expect)
      throw nb::value_error((accepted(fn, planes) + "; got a non-contiguous array (np.ascontiguousarray copies)").c_str());
    expect *= static_cast<int64_t>(arr.shape(i));
  }
  return static_cast<float*>(arr.data());
}

nb::object encode_into(Encoder enc, const char* fn, int planes, const Game& g, int seat, nb::handle out) {
  check_seat(seat, fn);
  if (out.is_none()) {
    auto* buf = new float[static_cast<size_t>(planes) * kPlaneWidth];
    nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
    enc(g, seat, buf);
    return nb::cast(nb::ndarray<nb::numpy, float, nb::ndim<2>>(buf, {static_cast<size_t>(planes), kPlaneWidth}, owner));
  }
  float* dst = nullptr;
  if (!try_fast(out, planes, &dst)) dst = checked_out(out, fn, planes);
  enc(g, seat, dst);
  return nb::borrow(out);
}

}  // namespace

void register_encode(nb::module_& m) {
  m.attr("PUBLIC_PLANES") = kPublicPlanes;
  m.attr("ORACLE_PLANES") = kOraclePlanes;
  m.attr("PLANE_WIDTH") = kPlaneWidth;
  m.def("encode_public",
        [](const Game& g, int seat, nb::handle out) {
          return encode_into(&encode_public, "encode_public", kPublicPlanes, g, seat, out);
        },
        "game"_a, "seat"_a, "out"_a = nb::none(),
        "Public observation of `seat`: (84, 34) float32 planes (docs/mahjong_encoding.md). Writes into `out`\n"
        "(a float32 C-contiguous (84, 34) or (2856,) numpy/torch CPU array) and returns it, or a new array.");
  m.def("encode_oracle",
        [](const Game& g, int seat, nb::handle out) {
          return encode_into(&encode_oracle, "encode_oracle", kOraclePlanes, g, seat, out);
        },
        "game"_a, "seat"_a, "out"_a = nb::none(),
        "Oracle (hidden information) planes of `seat`: (205, 34) float32, as encode_public.");
  m.attr("LOOKAHEAD_PLANES") = kLookaheadPlanes;
  m.def("encode_lookahead",
        [](nb::handle obs, int threads) {
          if (threads < 1) throw nb::value_error(("encode_lookahead: threads must be >= 1, got " + std::to_string(threads)).c_str());
          const std::string want = "encode_lookahead: expected a CPU array (numpy or torch) of public planes, "
                                   "shape (..., 84, 34)";
          // The input is only read, so a converted copy (another float dtype, a strided view) is fine.
          nb::ndarray<const float, nb::c_contig, nb::device::cpu> in;
          if (!nb::try_cast(obs, in, true))
            throw nb::type_error((want + "; got " + nb::type_name(obs.type()).c_str()).c_str());
          const size_t nd = in.ndim();
          if (nd < 2 || in.shape(nd - 1) != kPlaneWidth || in.shape(nd - 2) != static_cast<size_t>(kPublicPlanes)) {
            std::string shape = "(";
            for (size_t i = 0; i < nd; ++i) shape += (i ? ", " : "") + std::to_string(in.shape(i));
            throw nb::value_error((want + "; got shape " + shape + ")").c_str());
          }
          size_t rows = 1;
          std::vector<size_t> dims;
          for (size_t i = 0; i + 2 < nd; ++i) rows *= in.shape(i), dims.push_back(in.shape(i));
          dims.push_back(kLookaheadPlanes);
          dims.push_back(kPlaneWidth);
          auto* buf = new float[rows * kLookaheadPlanes * kPlaneWidth];
          nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<float*>(p); });
          {
            nb::gil_scoped_release release;
            const float* src = in.data();
            auto run = [&](size_t begin, size_t end) {
              for (size_t r = begin; r < end; ++r)
                encode_lookahead(src + r * kPublicPlanes * kPlaneWidth, buf + r * kLookaheadPlanes * kPlaneWidth);
            };
            // ~60 us a row: a thread is worth spawning per 64 rows or more.
            const size_t parts = std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(rows / 64, 1));
            std::vector<std::thread> pool;
            for (size_t p = 1; p < parts; ++p) pool.emplace_back(run, rows * p / parts, rows * (p + 1) / parts);
            run(0, rows / parts);
            for (auto& t : pool) t.join();
          }
          return nb::ndarray<nb::numpy, float>(buf, dims.size(), dims.data(), owner);
        },
        "public"_a, "threads"_a = 1,
        "Lookahead planes (..., 5, 34) float32 from public planes (..., 84, 34): per discard kind the shanten\n"
        "after it, whether it keeps the best shanten, the live advancing tiles after it (the rule bot's\n"
        "ukeire) absolute and relative to the best; for 3n+1-tile hands the unseen copies of each advancing\n"
        "kind (docs/mahjong_encoding.md). `threads` > 1 splits a batch over that many threads (GIL released).");
  m.def("bench_encode",
        [](const Game& g, int seat, int64_t n, bool oracle) {
          check_seat(seat, "bench_encode");
          if (n < 1) throw nb::value_error("bench_encode: n must be >= 1");
          nb::gil_scoped_release release;
          alignas(64) static thread_local float buf[kOraclePlanes * kPlaneWidth];
          const auto t0 = std::chrono::steady_clock::now();
          for (int64_t i = 0; i < n; ++i) {
            if (oracle) encode_oracle(g, seat, buf);
            else encode_public(g, seat, buf);
            asm volatile("" : : "r"(buf) : "memory");  // keep every encode
          }
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        },
        "game"_a, "seat"_a = 0, "n"_a = 100000, "oracle"_a = false,
        "Encode the same state n times in C++ (GIL released); returns the seconds taken.");
}

}  // namespace meeple::mj
