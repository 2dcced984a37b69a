#pragma once
// Descriptive statistics (for float, double and long double) and simple regression.
#include <cstddef>
#include <optional>
#include <vector>

namespace nativecore::numeric {

// Empty inputs (fewer than two values for sample statistics) give NaN.
template <typename T> T mean(const std::vector<T>& v);
template <typename T> T variance(const std::vector<T>& v, bool sample = true);
template <typename T> T stddev(const std::vector<T>& v, bool sample = true);
template <typename T> T median(std::vector<T> v);
// Linear interpolation between closest ranks, p in [0, 100].
template <typename T> T percentile(std::vector<T> v, T p);
template <typename T> T covariance(const std::vector<T>& x, const std::vector<T>& y);
template <typename T> T pearson(const std::vector<T>& x, const std::vector<T>& y);
template <typename T> std::vector<std::size_t> histogram(const std::vector<T>& v, T lo, T hi, std::size_t bins);

// Welford's online algorithm.
template <typename T>
class BasicRunningStats {
public:
    void push(T x) noexcept;
    std::size_t count() const noexcept { return n_; }
    T mean() const noexcept { return mean_; }
    T variance() const noexcept;  // sample variance
    T min() const noexcept { return min_; }
    T max() const noexcept { return max_; }

private:
    std::size_t n_ = 0;
    T mean_ = 0;
    T m2_ = 0;
    T min_ = 0;
    T max_ = 0;
};
using RunningStats = BasicRunningStats<double>;

#define NC_STATS_EXTERN(T)                                                                                  \
    extern template T mean<T>(const std::vector<T>&);                                                      \
    extern template T variance<T>(const std::vector<T>&, bool);                                            \
    extern template T stddev<T>(const std::vector<T>&, bool);                                              \
    extern template T median<T>(std::vector<T>);                                                           \
    extern template T percentile<T>(std::vector<T>, T);                                                    \
    extern template T covariance<T>(const std::vector<T>&, const std::vector<T>&);                         \
    extern template T pearson<T>(const std::vector<T>&, const std::vector<T>&);                            \
    extern template std::vector<std::size_t> histogram<T>(const std::vector<T>&, T, T, std::size_t);       \
    extern template class BasicRunningStats<T>;
NC_STATS_EXTERN(float)
NC_STATS_EXTERN(double)
NC_STATS_EXTERN(long double)
#undef NC_STATS_EXTERN

// regression.cpp
struct LinearFit {
    double slope = 0.0;
    double intercept = 0.0;
    double r2 = 0.0;
};
std::optional<LinearFit> fit_linear(const std::vector<double>& x, const std::vector<double>& y);
// Least-squares polynomial of the given degree; coefficients in ascending order.
std::optional<std::vector<double>> polyfit(const std::vector<double>& x, const std::vector<double>& y,
                                           unsigned degree);

}  // namespace nativecore::numeric
