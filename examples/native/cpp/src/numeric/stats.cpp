// Descriptive statistics, explicitly instantiated for float, double and long double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "nativecore/stats.hpp"

namespace nativecore::numeric {
namespace {

template <typename T>
constexpr T nan_v() {
    return std::numeric_limits<T>::quiet_NaN();
}

// Kahan-Babuska (Neumaier) compensated summation.
template <typename T>
T stable_sum(const std::vector<T>& v) {
    T sum = 0, c = 0;
    for (const T x : v) {
        const T t = sum + x;
        if (std::abs(sum) >= std::abs(x))
            c += (sum - t) + x;
        else
            c += (x - t) + sum;
        sum = t;
    }
    return sum + c;
}

}  // namespace

template <typename T>
T mean(const std::vector<T>& v) {
    return v.empty() ? nan_v<T>() : stable_sum(v) / static_cast<T>(v.size());
}

template <typename T>
T variance(const std::vector<T>& v, bool sample) {
    const std::size_t dof = sample ? 1 : 0;
    if (v.size() <= dof) return nan_v<T>();
    const T m = mean(v);
    T acc = 0;
    for (const T x : v) acc += (x - m) * (x - m);
    return acc / static_cast<T>(v.size() - dof);
}

template <typename T>
T stddev(const std::vector<T>& v, bool sample) {
    return std::sqrt(variance(v, sample));
}

template <typename T>
T median(std::vector<T> v) {
    return percentile(std::move(v), T(50));
}

template <typename T>
T percentile(std::vector<T> v, T p) {
    if (v.empty() || !(p >= T(0) && p <= T(100))) return nan_v<T>();
    std::sort(v.begin(), v.end());
    const T rank = p / T(100) * static_cast<T>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const std::size_t hi = std::min(lo + 1, v.size() - 1);
    const T frac = rank - static_cast<T>(lo);
    return v[lo] + (v[hi] - v[lo]) * frac;
}

template <typename T>
T covariance(const std::vector<T>& x, const std::vector<T>& y) {
    if (x.size() != y.size()) throw std::invalid_argument("covariance: size mismatch");
    if (x.size() < 2) return nan_v<T>();
    const T mx = mean(x), my = mean(y);
    T acc = 0;
    for (std::size_t i = 0; i < x.size(); ++i) acc += (x[i] - mx) * (y[i] - my);
    return acc / static_cast<T>(x.size() - 1);
}

template <typename T>
T pearson(const std::vector<T>& x, const std::vector<T>& y) {
    const T sx = stddev(x), sy = stddev(y);
    if (!(sx > T(0)) || !(sy > T(0))) return nan_v<T>();
    return covariance(x, y) / (sx * sy);
}

template <typename T>
std::vector<std::size_t> histogram(const std::vector<T>& v, T lo, T hi, std::size_t bins) {
    if (bins == 0 || !(hi > lo)) throw std::invalid_argument("histogram: bad range");
    std::vector<std::size_t> h(bins, 0);
    const T width = (hi - lo) / static_cast<T>(bins);
    for (const T x : v) {
        if (x < lo || x > hi) continue;
        auto b = static_cast<std::size_t>((x - lo) / width);
        if (b >= bins) b = bins - 1;  // x == hi
        ++h[b];
    }
    return h;
}

template <typename T>
void BasicRunningStats<T>::push(T x) noexcept {
    ++n_;
    if (n_ == 1) {
        min_ = max_ = x;
    } else {
        min_ = std::min(min_, x);
        max_ = std::max(max_, x);
    }
    const T delta = x - mean_;
    mean_ += delta / static_cast<T>(n_);
    m2_ += delta * (x - mean_);
}

template <typename T>
T BasicRunningStats<T>::variance() const noexcept {
    return n_ < 2 ? nan_v<T>() : m2_ / static_cast<T>(n_ - 1);
}

#define NC_STATS_INSTANTIATE(T)                                                                       \
    template T mean<T>(const std::vector<T>&);                                                       \
    template T variance<T>(const std::vector<T>&, bool);                                             \
    template T stddev<T>(const std::vector<T>&, bool);                                               \
    template T median<T>(std::vector<T>);                                                            \
    template T percentile<T>(std::vector<T>, T);                                                     \
    template T covariance<T>(const std::vector<T>&, const std::vector<T>&);                          \
    template T pearson<T>(const std::vector<T>&, const std::vector<T>&);                             \
    template std::vector<std::size_t> histogram<T>(const std::vector<T>&, T, T, std::size_t);        \
    template class BasicRunningStats<T>;
NC_STATS_INSTANTIATE(float)
NC_STATS_INSTANTIATE(double)
NC_STATS_INSTANTIATE(long double)
#undef NC_STATS_INSTANTIATE

}  // namespace nativecore::numeric
