// The exported C ABI. No exception may cross this boundary.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "nativecore/algo.hpp"
#include "nativecore/hash.hpp"
#include "nativecore/kernels.hpp"
#include "nativecore/matrix.hpp"
#include "nativecore/nativecore.h"
#include "nativecore/numeric.hpp"
#include "nativecore/stats.hpp"
#include "nativecore/text.hpp"
#include "nativecore/tokenizer.hpp"

#ifndef NC_VERSION_STRING
#define NC_VERSION_STRING "0.0.0"
#endif

namespace nc = nativecore;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> to_vector(const double* v, size_t n) {
    return v && n ? std::vector<double>(v, v + n) : std::vector<double>();
}

nc::numeric::Matrix<double> to_matrix(const double* m, size_t n) {
    nc::numeric::Matrix<double> a(n, n);
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) a(i, j) = m[i * n + j];
    return a;
}

}  // namespace

extern "C" {

const char* nc_version(void) { return NC_VERSION_STRING; }

uint32_t nc_crc32(const void* data, size_t len) { return nc::hash::crc32(data, data ? len : 0); }
uint32_t nc_adler32(const void* data, size_t len) { return nc::hash::adler32(data, data ? len : 0); }
uint64_t nc_fnv1a64(const void* data, size_t len) { return nc::hash::fnv1a64(data, data ? len : 0); }
uint32_t nc_murmur3_32(const void* data, size_t len, uint32_t seed) {
    return nc::hash::murmur3_32(data, data ? len : 0, seed);
}
uint32_t nc_xxh32(const void* data, size_t len, uint32_t seed) { return nc::hash::xxh32(data, data ? len : 0, seed); }

int nc_determinant(const double* m, size_t n, double* out) {
    if (!m || !out || n == 0 || n > 4096) return -1;
    try {
        const auto d = nc::numeric::lu_decompose(to_matrix(m, n));
        if (d.singular) {
            *out = 0.0;
            return 1;
        }
        double det = d.sign;
        for (size_t i = 0; i < n; ++i) det *= d.lu(i, i);
        *out = det;
        return 0;
    } catch (...) {
        return -1;
    }
}

int nc_solve(const double* a, const double* b, size_t n, double* x) {
    if (!a || !b || !x || n == 0 || n > 4096) return -1;
    try {
        const auto r = nc::numeric::solve(to_matrix(a, n), std::vector<double>(b, b + n));
        if (!r) return 1;
        std::memcpy(x, r->data(), n * sizeof(double));
        return 0;
    } catch (...) {
        return -1;
    }
}

double nc_mean(const double* v, size_t n) {
    try {
        return nc::numeric::mean(to_vector(v, n));
    } catch (...) {
        return kNaN;
    }
}

double nc_stddev(const double* v, size_t n) {
    try {
        return nc::numeric::stddev(to_vector(v, n));
    } catch (...) {
        return kNaN;
    }
}

double nc_median(const double* v, size_t n) {
    try {
        return nc::numeric::median(to_vector(v, n));
    } catch (...) {
        return kNaN;
    }
}

size_t nc_levenshtein(const char* a, const char* b) {
    try {
        return nc::text::levenshtein(a ? a : "", b ? b : "");
    } catch (...) {
        return static_cast<size_t>(-1);
    }
}

long nc_count_tokens(const char* src) {
    if (!src) return -1;
    try {
        return static_cast<long>(nc::text::tokenize(src).size());
    } catch (...) {
        return -1;
    }
}

uint64_t nc_nth_prime(uint32_t n) {
    if (n == 0 || n > 10'000'000u) return 0;
    try {
        return nc::numeric::nth_prime(n);
    } catch (...) {
        return 0;
    }
}

int nc_is_prime(uint64_t n) { return nc::numeric::is_prime(n) ? 1 : 0; }

size_t nc_factorial_decimal(unsigned n, char* buf, size_t buflen) {
    try {
        const std::string s = nc::numeric::factorial(n).to_string();
        if (buf && buflen > 0) {
            const size_t k = s.size() < buflen - 1 ? s.size() : buflen - 1;
            std::memcpy(buf, s.data(), k);
            buf[k] = '\0';
        }
        return s.size();
    } catch (...) {
        if (buf && buflen > 0) buf[0] = '\0';
        return 0;
    }
}

int nc_reduce(int dtype, int op, const void* data, size_t n, double* out) {
    namespace k = nc::kernels;
    if (!out || dtype < 0 || dtype >= k::kNumDTypes || op < 0 || op > static_cast<int>(k::ReduceOp::SumSquares))
        return -1;
    try {
        *out = k::reduce(static_cast<k::DType>(dtype), static_cast<k::ReduceOp>(op), data, n);
        return 0;
    } catch (...) {
        return -1;
    }
}

int nc_binary(int dtype, int op, const void* a, const void* b, void* out, size_t n) {
    namespace k = nc::kernels;
    if (dtype < 0 || dtype >= k::kNumDTypes || op < 0 || op > static_cast<int>(k::BinaryOp::Max)) return -1;
    try {
        k::binary(static_cast<k::DType>(dtype), static_cast<k::BinaryOp>(op), a, b, out, n);
        return 0;
    } catch (...) {
        return -1;
    }
}

int nc_cast(int from_dtype, int to_dtype, const void* in, void* out, size_t n) {
    namespace k = nc::kernels;
    if (from_dtype < 0 || from_dtype >= k::kNumDTypes || to_dtype < 0 || to_dtype >= k::kNumDTypes) return -1;
    try {
        k::cast(static_cast<k::DType>(from_dtype), static_cast<k::DType>(to_dtype), in, out, n);
        return 0;
    } catch (...) {
        return -1;
    }
}

int nc_selftest(void) {
    int failures = 0;
    auto check = [&failures](bool ok) {
        if (!ok) ++failures;
    };
    try {
        check(nc_crc32("123456789", 9) == 0xCBF43926u);
        check(nc_adler32("Wikipedia", 9) == 0x11E60398u);
        check(nc_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
        check(nc_murmur3_32("", 0, 1) == 0x514E28B7u);
        check(nc_xxh32("", 0, 0) == 0x02CC5D05u);
        const double m[4] = {4.0, 3.0, 6.0, 3.0};
        double det = 0.0;
        check(nc_determinant(m, 2, &det) == 0 && std::abs(det + 6.0) < 1e-12);
        check(nc_levenshtein("kitten", "sitting") == 3);
        check(nc_count_tokens("int x = a[i] << 2; // done") == 10);
        check(nc_nth_prime(1000) == 7919);
        check(nc_is_prime(18446744073709551557ull) == 1);
        char buf[32];
        check(nc_factorial_decimal(20, buf, sizeof buf) == 19 && std::strcmp(buf, "2432902008176640000") == 0);
        const int32_t ints[4] = {7, -3, 12, 5};
        double sum = 0.0, argmax = 0.0;
        check(nc_reduce(2, 0, ints, 4, &sum) == 0 && sum == 21.0);
        check(nc_reduce(2, 5, ints, 4, &argmax) == 0 && argmax == 2.0);
        nc::algo::Pcg32 rng(42, 54);
        check(rng.next() == 0xa15c02b7u);
    } catch (...) {
        ++failures;
    }
    return failures;
}

}  // extern "C"
