// Shared helpers of the chess binding files: caller-provided output buffers,
// numpy arrays owning a vector, the evaluator call of the search bindings.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "chess/actions.hpp"

namespace meeple::chess::bind {

namespace nb = nanobind;

inline std::string shape_text(std::initializer_list<std::size_t> shape) {
  std::string s = "(";
  std::size_t i = 0;
  for (std::size_t d : shape) {
    s += std::to_string(d);
    s += (++i < shape.size()) ? ", " : (shape.size() == 1 ? "," : "");
  }
  return s + ")";
}

// A writable C-contiguous CPU array of element type T and exactly `shape`
// (numpy, a CPU torch tensor, a view batch[i] of a batch); raises TypeError
// (wrong kind or dtype, read-only) or ValueError (wrong shape) naming `what`.
template <class T>
T* out_buffer(nb::handle obj, std::initializer_list<std::size_t> shape, const char* what, const char* dtype) {
  nb::ndarray<T, nb::c_contig, nb::device::cpu> a;
  const std::string want = std::string("a writable C-contiguous ") + dtype + " CPU array of shape " + shape_text(shape);
  if (!nb::try_cast(obj, a, false))
    throw nb::type_error((std::string(what) + " must be " + want + ", got " + nb::type_name(obj.type()).c_str() +
                          " (wrong dtype, not contiguous or read-only?)")
                             .c_str());
  bool ok = a.ndim() == shape.size();
  std::size_t i = 0;
  for (std::size_t d : shape) ok = ok && a.shape(i++) == d;
  if (!ok) {
    std::string got = "(";
    for (std::size_t k = 0; k < a.ndim(); ++k) got += std::to_string(a.shape(k)) + (k + 1 < a.ndim() ? ", " : "");
    throw nb::value_error((std::string(what) + " must be " + want + ", got shape " + got + ")").c_str());
  }
  return a.data();
}

using namespace nb::literals;

template <class T>
inline nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& v, std::initializer_list<std::size_t> shape) {
  auto* p = new std::vector<T>(std::move(v));
  nb::capsule owner(p, [](void* q) noexcept { delete static_cast<std::vector<T>*>(q); });
  return nb::ndarray<nb::numpy, T>(p->data(), shape, owner);
}

// Calls the Python evaluator on one batch and copies its outputs.
inline void call_evaluator(nb::handle evaluator, nb::handle planes, nb::handle legal, std::size_t n, float* policy_out,
                    float* value_out) {
  nb::object out = evaluator(planes, legal);
  nb::tuple t;
  if (!nb::try_cast(out, t) || t.size() != 2)
    throw nb::type_error("evaluator must return a tuple (policy (B, 4672), value (B,))");
  nb::object np = nb::module_::import_("numpy");
  auto as_f32 = [&](nb::handle h) {
    return nb::cast<nb::ndarray<const float, nb::c_contig, nb::device::cpu>>(
        np.attr("ascontiguousarray")(h, "dtype"_a = np.attr("float32")));
  };
  auto pol = as_f32(t[0]);
  auto val = as_f32(t[1]);
  if (pol.ndim() != 2 || pol.shape(0) != n || pol.shape(1) != static_cast<std::size_t>(kNumActions))
    throw nb::value_error(("evaluator policy must have shape (" + std::to_string(n) + ", 4672)").c_str());
  if (val.size() != n) throw nb::value_error(("evaluator value must have shape (" + std::to_string(n) + ",)").c_str());
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(val.data()[i]))
      throw nb::value_error(("evaluator value[" + std::to_string(i) + "] is not finite").c_str());
  std::memcpy(policy_out, pol.data(), sizeof(float) * n * kNumActions);
  std::memcpy(value_out, val.data(), sizeof(float) * n);
}

}  // namespace meeple::chess::bind
