// Iterative radix-2 Cooley-Tukey FFT and integer convolution.
#include <cmath>
#include <stdexcept>

#include "nativecore/numeric.hpp"

namespace nativecore::numeric {

template <typename T>
void fft(std::vector<std::complex<T>>& a, bool inverse) {
    const std::size_t n = a.size();
    if (n == 0 || (n & (n - 1)) != 0) throw std::invalid_argument("fft: size must be a power of two");
    for (std::size_t i = 1, j = 0; i < n; ++i) {  // bit-reversal permutation
        std::size_t bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) std::swap(a[i], a[j]);
    }
    const T pi = std::acos(T(-1));
    std::vector<std::complex<T>> twiddle;
    for (std::size_t len = 2; len <= n; len <<= 1) {
        // Twiddle factors computed directly (not by repeated multiplication) for accuracy.
        twiddle.resize(len / 2);
        for (std::size_t j = 0; j < len / 2; ++j) {
            const T ang = T(2) * pi * static_cast<T>(j) / static_cast<T>(len) * (inverse ? T(1) : T(-1));
            twiddle[j] = std::complex<T>(std::cos(ang), std::sin(ang));
        }
        for (std::size_t i = 0; i < n; i += len) {
            for (std::size_t j = 0; j < len / 2; ++j) {
                const std::complex<T> u = a[i + j];
                const std::complex<T> v = a[i + j + len / 2] * twiddle[j];
                a[i + j] = u + v;
                a[i + j + len / 2] = u - v;
            }
        }
    }
    if (inverse)
        for (auto& x : a) x /= static_cast<T>(n);
}

template void fft<float>(std::vector<std::complex<float>>&, bool);
template void fft<double>(std::vector<std::complex<double>>&, bool);
template void fft<long double>(std::vector<std::complex<long double>>&, bool);

std::vector<std::int64_t> convolve(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    if (a.empty() || b.empty()) return {};
    const std::size_t need = a.size() + b.size() - 1;
    std::size_t n = 1;
    while (n < need) n <<= 1;
    std::vector<std::complex<double>> fa(a.begin(), a.end()), fb(b.begin(), b.end());
    fa.resize(n);
    fb.resize(n);
    fft(fa, false);
    fft(fb, false);
    for (std::size_t i = 0; i < n; ++i) fa[i] *= fb[i];
    fft(fa, true);
    std::vector<std::int64_t> r(need);
    for (std::size_t i = 0; i < need; ++i) r[i] = static_cast<std::int64_t>(std::llround(fa[i].real()));
    return r;
}

}  // namespace nativecore::numeric
