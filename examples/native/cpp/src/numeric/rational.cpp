// Exact rational arithmetic over fixed-width integers (overflow is the caller's concern).
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "nativecore/numeric.hpp"

namespace nativecore::numeric {

template <typename I>
Rational<I>::Rational(I num, I den) : num_(num), den_(den) {
    if (den_ == 0) throw std::domain_error("Rational: zero denominator");
    if (den_ < 0) {
        num_ = -num_;
        den_ = -den_;
    }
    const I g = std::gcd(num_, den_);
    if (g > 1) {
        num_ /= g;
        den_ /= g;
    }
}

template <typename I>
Rational<I> Rational<I>::operator+(const Rational& o) const {
    const I g = std::gcd(den_, o.den_);
    return Rational(num_ * (o.den_ / g) + o.num_ * (den_ / g), den_ / g * o.den_);
}

template <typename I>
Rational<I> Rational<I>::operator-(const Rational& o) const {
    return *this + Rational(-o.num_, o.den_);
}

template <typename I>
Rational<I> Rational<I>::operator*(const Rational& o) const {
    const I g1 = std::gcd(num_, o.den_), g2 = std::gcd(o.num_, den_);
    return Rational((num_ / g1) * (o.num_ / g2), (den_ / g2) * (o.den_ / g1));
}

template <typename I>
Rational<I> Rational<I>::operator/(const Rational& o) const {
    if (o.num_ == 0) throw std::domain_error("Rational: division by zero");
    return *this * Rational(o.den_, o.num_);
}

template <typename I>
bool Rational<I>::operator<(const Rational& o) const {
    return static_cast<long double>(num_) * o.den_ < static_cast<long double>(o.num_) * den_;
}

template <typename I>
std::string Rational<I>::to_string() const {
    return den_ == 1 ? std::to_string(num_) : std::to_string(num_) + "/" + std::to_string(den_);
}

template class Rational<std::int32_t>;
template class Rational<std::int64_t>;

Rational<std::int64_t> approximate(double x, std::int64_t max_den) {
    if (!std::isfinite(x) || max_den < 1) throw std::invalid_argument("approximate: bad input");
    // Convergents h/k of the continued fraction of x.
    std::int64_t h0 = 0, h1 = 1, k0 = 1, k1 = 0;
    double r = x;
    for (int i = 0; i < 64; ++i) {
        const double a = std::floor(r);
        if (std::abs(a) > 9e15) break;
        const auto ai = static_cast<std::int64_t>(a);
        const std::int64_t k2 = ai * k1 + k0;
        if (k2 > max_den) break;
        const std::int64_t h2 = ai * h1 + h0;
        h0 = h1;
        h1 = h2;
        k0 = k1;
        k1 = k2;
        const double frac = r - a;
        if (frac < 1e-15) break;
        r = 1.0 / frac;
    }
    return Rational<std::int64_t>(h1, k1 == 0 ? 1 : k1);
}

}  // namespace nativecore::numeric
