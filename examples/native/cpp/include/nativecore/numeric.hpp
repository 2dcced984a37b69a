#pragma once
// Polynomials, quadrature, FFT, primes, rationals and big integers.
#include <complex>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nativecore::numeric {

// polynomial.cpp: coefficients in ascending order of power; instantiated for float, double
// and long double.
template <typename T>
class BasicPolynomial {
public:
    BasicPolynomial() = default;
    explicit BasicPolynomial(std::vector<T> coeffs);
    std::size_t degree() const noexcept { return coeffs_.empty() ? 0 : coeffs_.size() - 1; }
    const std::vector<T>& coeffs() const noexcept { return coeffs_; }
    T operator()(T x) const noexcept;                      // Horner
    std::complex<T> operator()(std::complex<T> z) const noexcept;
    BasicPolynomial derivative() const;
    BasicPolynomial integral(T constant = T(0)) const;
    BasicPolynomial operator+(const BasicPolynomial& o) const;
    BasicPolynomial operator*(const BasicPolynomial& o) const;
    std::optional<T> newton_root(T x0, T tol = T(1e-12), int max_iter = 100) const;
    // All complex roots (Durand-Kerner / Weierstrass iteration), sorted by real then imaginary part.
    std::vector<std::complex<T>> all_roots(int max_iter = 500) const;
    std::string to_string() const;

private:
    void normalize();
    std::vector<T> coeffs_;
};
using Polynomial = BasicPolynomial<double>;
extern template class BasicPolynomial<float>;
extern template class BasicPolynomial<double>;
extern template class BasicPolynomial<long double>;

// integrate.cpp
using Func = std::function<double(double)>;
double trapezoid(const Func& f, double a, double b, std::size_t n);
double simpson(const Func& f, double a, double b, std::size_t n);
double adaptive_simpson(const Func& f, double a, double b, double eps = 1e-10, int max_depth = 40);
// n-point Gauss-Legendre quadrature (nodes by Newton iteration on P_n), 1 <= n <= 64.
double gauss_legendre(const Func& f, double a, double b, unsigned n);

// fft.cpp: in-place radix-2 FFT; size must be a power of two. Instantiated for float,
// double and long double.
template <typename T> void fft(std::vector<std::complex<T>>& a, bool inverse);
extern template void fft<float>(std::vector<std::complex<float>>&, bool);
extern template void fft<double>(std::vector<std::complex<double>>&, bool);
extern template void fft<long double>(std::vector<std::complex<long double>>&, bool);
// Exact integer convolution through a double-precision FFT (|result| < 2^50).
std::vector<std::int64_t> convolve(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);

// primes.cpp
std::vector<std::uint32_t> sieve(std::uint32_t limit);  // primes <= limit
bool is_prime(std::uint64_t n) noexcept;                // deterministic Miller-Rabin
std::uint64_t nth_prime(std::uint32_t n);               // nth_prime(1) == 2
std::vector<std::uint64_t> factorize(std::uint64_t n);  // ascending prime factors
std::uint64_t gcd_u64(std::uint64_t a, std::uint64_t b) noexcept;

// rational.cpp: always normalized (positive denominator, lowest terms).
template <typename I>
class Rational {
public:
    Rational(I num = 0, I den = 1);
    I num() const noexcept { return num_; }
    I den() const noexcept { return den_; }
    Rational operator+(const Rational& o) const;
    Rational operator-(const Rational& o) const;
    Rational operator*(const Rational& o) const;
    Rational operator/(const Rational& o) const;
    bool operator==(const Rational& o) const noexcept { return num_ == o.num_ && den_ == o.den_; }
    bool operator<(const Rational& o) const;
    double to_double() const noexcept { return static_cast<double>(num_) / static_cast<double>(den_); }
    std::string to_string() const;

private:
    I num_;
    I den_;
};
extern template class Rational<std::int32_t>;
extern template class Rational<std::int64_t>;
// Best rational approximation with denominator <= max_den (continued fractions).
Rational<std::int64_t> approximate(double x, std::int64_t max_den);

// bigint.cpp: arbitrary-precision unsigned integers (base 10^9 limbs).
class BigUint {
public:
    BigUint(std::uint64_t v = 0);
    static std::optional<BigUint> parse(std::string_view decimal);
    BigUint operator+(const BigUint& o) const;
    BigUint operator*(const BigUint& o) const;
    BigUint mul_small(std::uint32_t m) const;
    bool operator==(const BigUint& o) const noexcept { return limbs_ == o.limbs_; }
    bool operator<(const BigUint& o) const noexcept;
    std::size_t digits() const;
    std::string to_string() const;

private:
    void trim();
    std::vector<std::uint32_t> limbs_;  // little-endian
};
BigUint factorial(unsigned n);
BigUint fibonacci(unsigned n);

}  // namespace nativecore::numeric
