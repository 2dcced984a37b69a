// Searching in sorted vectors and selection.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "nativecore/algo.hpp"

namespace nativecore::algo {

template <typename T>
std::size_t lower_bound_index(const std::vector<T>& v, const T& x) {
    std::size_t lo = 0, hi = v.size();
    while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

template <typename T>
std::optional<std::size_t> binary_search_index(const std::vector<T>& v, const T& x) {
    const std::size_t i = lower_bound_index(v, x);
    if (i < v.size() && !(x < v[i])) return i;
    return std::nullopt;
}

template <typename T>
T quickselect(std::vector<T>& v, std::size_t k) {
    if (k >= v.size()) throw std::out_of_range("quickselect: k out of range");
    std::size_t lo = 0, hi = v.size() - 1;
    while (lo < hi) {
        // Lomuto partition around the median of three.
        const std::size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < v[lo]) std::swap(v[mid], v[lo]);
        if (v[hi] < v[lo]) std::swap(v[hi], v[lo]);
        if (v[mid] < v[hi]) std::swap(v[mid], v[hi]);  // pivot now at hi
        const T pivot = v[hi];
        std::size_t store = lo;
        for (std::size_t i = lo; i < hi; ++i) {
            if (v[i] < pivot) std::swap(v[i], v[store++]);
        }
        std::swap(v[store], v[hi]);
        if (k == store) return v[k];
        if (k < store)
            hi = store - 1;
        else
            lo = store + 1;
    }
    return v[k];
}

std::optional<std::size_t> exponential_search(const std::vector<std::int64_t>& v, std::int64_t x) {
    if (v.empty()) return std::nullopt;
    std::size_t bound = 1;
    while (bound < v.size() && v[bound] < x) bound *= 2;
    const std::size_t lo = bound / 2, hi = std::min(bound + 1, v.size());
    const std::vector<std::int64_t> window(v.begin() + static_cast<std::ptrdiff_t>(lo),
                                           v.begin() + static_cast<std::ptrdiff_t>(hi));
    const auto i = binary_search_index(window, x);
    if (!i) return std::nullopt;
    return lo + *i;
}

#define NC_INSTANTIATE_SEARCH(T)                                                               \
    template std::size_t lower_bound_index<T>(const std::vector<T>&, const T&);                \
    template std::optional<std::size_t> binary_search_index<T>(const std::vector<T>&, const T&); \
    template T quickselect<T>(std::vector<T>&, std::size_t);

NC_INSTANTIATE_SEARCH(int)
NC_INSTANTIATE_SEARCH(unsigned)
NC_INSTANTIATE_SEARCH(std::int64_t)
NC_INSTANTIATE_SEARCH(std::uint64_t)
NC_INSTANTIATE_SEARCH(float)
NC_INSTANTIATE_SEARCH(double)
NC_INSTANTIATE_SEARCH(long double)
NC_INSTANTIATE_SEARCH(std::string)
NC_INSTANTIATE_SEARCH(std::string_view)
#undef NC_INSTANTIATE_SEARCH

}  // namespace nativecore::algo
