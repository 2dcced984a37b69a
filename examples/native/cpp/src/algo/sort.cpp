// Classic comparison sorts, explicitly instantiated for a few element types.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "nativecore/algo.hpp"

namespace nativecore::algo {
namespace {

template <typename T, typename Compare>
void merge_sort_rec(std::vector<T>& v, std::vector<T>& tmp, std::size_t lo, std::size_t hi, Compare& cmp) {
    if (hi - lo <= 16) {
        for (std::size_t i = lo + 1; i < hi; ++i) {  // insertion sort for short runs
            T x = std::move(v[i]);
            std::size_t j = i;
            for (; j > lo && cmp(x, v[j - 1]); --j) v[j] = std::move(v[j - 1]);
            v[j] = std::move(x);
        }
        return;
    }
    const std::size_t mid = lo + (hi - lo) / 2;
    merge_sort_rec(v, tmp, lo, mid, cmp);
    merge_sort_rec(v, tmp, mid, hi, cmp);
    if (!cmp(v[mid], v[mid - 1])) return;  // already ordered
    std::size_t i = lo, j = mid, k = lo;
    while (i < mid && j < hi) tmp[k++] = cmp(v[j], v[i]) ? std::move(v[j++]) : std::move(v[i++]);
    while (i < mid) tmp[k++] = std::move(v[i++]);
    while (j < hi) tmp[k++] = std::move(v[j++]);
    std::move(tmp.begin() + static_cast<std::ptrdiff_t>(lo), tmp.begin() + static_cast<std::ptrdiff_t>(hi),
              v.begin() + static_cast<std::ptrdiff_t>(lo));
}

template <typename T, typename Compare>
void sift_down(std::vector<T>& v, std::size_t root, std::size_t n, Compare& cmp) {
    for (;;) {
        std::size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && cmp(v[child], v[child + 1])) ++child;
        if (!cmp(v[root], v[child])) return;
        std::swap(v[root], v[child]);
        root = child;
    }
}

template <typename T, typename Compare>
void quick_sort_rec(std::vector<T>& v, std::ptrdiff_t lo, std::ptrdiff_t hi, Compare& cmp) {
    while (hi - lo > 16) {
        // Median of three as pivot, Hoare partition.
        const std::ptrdiff_t mid = lo + (hi - lo) / 2;
        if (cmp(v[mid], v[lo])) std::swap(v[mid], v[lo]);
        if (cmp(v[hi], v[lo])) std::swap(v[hi], v[lo]);
        if (cmp(v[hi], v[mid])) std::swap(v[hi], v[mid]);
        const T pivot = v[mid];
        std::ptrdiff_t i = lo - 1, j = hi + 1;
        for (;;) {
            do ++i; while (cmp(v[i], pivot));
            do --j; while (cmp(pivot, v[j]));
            if (i >= j) break;
            std::swap(v[i], v[j]);
        }
        if (j - lo < hi - j) {  // recurse into the smaller half
            quick_sort_rec(v, lo, j, cmp);
            lo = j + 1;
        } else {
            quick_sort_rec(v, j + 1, hi, cmp);
            hi = j;
        }
    }
    for (std::ptrdiff_t i = lo + 1; i <= hi; ++i) {
        T x = std::move(v[i]);
        std::ptrdiff_t j = i;
        for (; j > lo && cmp(x, v[j - 1]); --j) v[j] = std::move(v[j - 1]);
        v[j] = std::move(x);
    }
}

}  // namespace

template <typename T, typename Compare>
void merge_sort(std::vector<T>& v, Compare cmp) {
    if (v.size() < 2) return;
    std::vector<T> tmp(v.size());
    merge_sort_rec(v, tmp, 0, v.size(), cmp);
}

template <typename T, typename Compare>
void heap_sort(std::vector<T>& v, Compare cmp) {
    const std::size_t n = v.size();
    for (std::size_t i = n / 2; i-- > 0;) sift_down(v, i, n, cmp);
    for (std::size_t end = n; end-- > 1;) {
        std::swap(v[0], v[end]);
        sift_down(v, 0, end, cmp);
    }
}

template <typename T, typename Compare>
void insertion_sort(std::vector<T>& v, Compare cmp) {
    for (std::size_t i = 1; i < v.size(); ++i) {
        T x = std::move(v[i]);
        std::size_t j = i;
        for (; j > 0 && cmp(x, v[j - 1]); --j) v[j] = std::move(v[j - 1]);
        v[j] = std::move(x);
    }
}

template <typename T, typename Compare>
void quick_sort(std::vector<T>& v, Compare cmp) {
    if (v.size() < 2) return;
    quick_sort_rec(v, 0, static_cast<std::ptrdiff_t>(v.size()) - 1, cmp);
}

template <typename T, typename Compare>
bool is_sorted_by(const std::vector<T>& v, Compare cmp) {
    for (std::size_t i = 1; i < v.size(); ++i)
        if (cmp(v[i], v[i - 1])) return false;
    return true;
}

#define NC_INSTANTIATE_SORTS(T, C)                                \
    template void merge_sort<T, C>(std::vector<T>&, C);           \
    template void heap_sort<T, C>(std::vector<T>&, C);            \
    template void insertion_sort<T, C>(std::vector<T>&, C);       \
    template void quick_sort<T, C>(std::vector<T>&, C);           \
    template bool is_sorted_by<T, C>(const std::vector<T>&, C);
#define NC_INSTANTIATE_SORTS_BOTH(T)          \
    NC_INSTANTIATE_SORTS(T, std::less<T>)     \
    NC_INSTANTIATE_SORTS(T, std::greater<T>)

using IntPair = std::pair<int, int>;
using ScoredName = std::pair<double, std::string>;
NC_INSTANTIATE_SORTS_BOTH(int)
NC_INSTANTIATE_SORTS_BOTH(unsigned)
NC_INSTANTIATE_SORTS_BOTH(std::int64_t)
NC_INSTANTIATE_SORTS_BOTH(std::uint64_t)
NC_INSTANTIATE_SORTS_BOTH(float)
NC_INSTANTIATE_SORTS_BOTH(double)
NC_INSTANTIATE_SORTS_BOTH(long double)
NC_INSTANTIATE_SORTS_BOTH(std::string)
NC_INSTANTIATE_SORTS_BOTH(std::string_view)
NC_INSTANTIATE_SORTS_BOTH(IntPair)
NC_INSTANTIATE_SORTS_BOTH(ScoredName)
#undef NC_INSTANTIATE_SORTS_BOTH
#undef NC_INSTANTIATE_SORTS

}  // namespace nativecore::algo
