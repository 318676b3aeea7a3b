// Helpers of the chess binding files: caller-provided output buffers (the
// search and self-play bindings are the generic ones, search_bind.hpp).
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

}  // namespace meeple::chess::bind
