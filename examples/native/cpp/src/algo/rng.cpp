// SplitMix64 and PCG32 (pcg32_random_r from the PCG reference implementation).
#include <cmath>
#include <set>
#include <string>

#include "nativecore/algo.hpp"

namespace nativecore::algo {

std::uint64_t SplitMix64::next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

Pcg32::Pcg32(std::uint64_t seed, std::uint64_t stream) {
    inc_ = (stream << 1u) | 1u;
    next();
    state_ += seed;
    next();
}

std::uint32_t Pcg32::next() noexcept {
    const std::uint64_t old = state_;
    state_ = old * 6364136223846793005ull + inc_;
    const auto xorshifted = static_cast<std::uint32_t>(((old >> 18u) ^ old) >> 27u);
    const auto rot = static_cast<std::uint32_t>(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((0u - rot) & 31u));
}

std::uint32_t Pcg32::bounded(std::uint32_t bound) noexcept {
    if (bound == 0) return 0;
    const std::uint32_t threshold = (0u - bound) % bound;  // rejection removes modulo bias
    for (;;) {
        const std::uint32_t r = next();
        if (r >= threshold) return r % bound;
    }
}

double Pcg32::uniform() noexcept { return static_cast<double>(next()) * 0x1.0p-32; }

double Pcg32::normal(double mean, double stddev) noexcept {
    if (has_spare_) {
        has_spare_ = false;
        return mean + stddev * spare_;
    }
    double u, v, s;
    do {
        u = 2.0 * uniform() - 1.0;
        v = 2.0 * uniform() - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = v * f;
    has_spare_ = true;
    return mean + stddev * u * f;
}

double Pcg32::exponential(double rate) noexcept { return -std::log1p(-uniform()) / rate; }

std::vector<std::size_t> sample_indices(std::size_t n, std::size_t k, Pcg32& rng) {
    if (k > n) k = n;
    std::set<std::size_t> chosen;
    for (std::size_t j = n - k; j < n; ++j) {
        const std::size_t t = static_cast<std::size_t>(rng.bounded(static_cast<std::uint32_t>(j + 1)));
        if (!chosen.insert(t).second) chosen.insert(j);
    }
    return std::vector<std::size_t>(chosen.begin(), chosen.end());
}

template <typename T>
void shuffle(std::vector<T>& v, Pcg32& rng) {
    for (std::size_t i = v.size(); i > 1; --i) {
        const std::size_t j = rng.bounded(static_cast<std::uint32_t>(i));
        std::swap(v[i - 1], v[j]);
    }
}

template void shuffle<int>(std::vector<int>&, Pcg32&);
template void shuffle<std::int64_t>(std::vector<std::int64_t>&, Pcg32&);
template void shuffle<double>(std::vector<double>&, Pcg32&);
template void shuffle<std::string>(std::vector<std::string>&, Pcg32&);

}  // namespace nativecore::algo
