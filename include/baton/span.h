// baton::Span<T>: a pointer and a count of elements, for C++17 callers
// (std::span is C++20). Not owning; the elements must outlive the Span.
//
//   std::vector<float> w(rows * cols);
//   ck->RegisterSharded("w", baton::Span<float>(w), {n, cols}, first, rows);
//   ck->RegisterSharded("w", w, {n, cols}, first, rows);   // the same
//
// Built from a pointer and a count, or from any contiguous container with
// data() and size() (std::vector, std::array, std::string, a C array).
#pragma once

#include <cstddef>
#include <iterator>
#include <type_traits>

namespace baton {

template <typename T>
class Span {
 public:
  using element_type = T;

  constexpr Span() noexcept = default;
  constexpr Span(T* data, size_t size) noexcept : data_(data), size_(size) {}
  template <size_t N>
  constexpr Span(T (&array)[N]) noexcept : data_(array), size_(N) {}  // NOLINT: implicit, as std::span
  // A contiguous container whose elements convert to T (a vector<float> to
  // Span<float> or Span<const float>).
  template <typename C,
            typename = std::enable_if_t<std::is_convertible_v<decltype(std::data(std::declval<C&>())), T*> &&
                                        !std::is_same_v<std::decay_t<C>, Span>>,
            typename = decltype(std::size(std::declval<C&>()))>
  constexpr Span(C& container) noexcept  // NOLINT: implicit, as std::span
      : data_(std::data(container)), size_(std::size(container)) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr size_t size() const noexcept { return size_; }
  constexpr size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace baton
