// Polynomials over float, double and long double.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "nativecore/numeric.hpp"

namespace nativecore::numeric {

template <typename T>
BasicPolynomial<T>::BasicPolynomial(std::vector<T> coeffs) : coeffs_(std::move(coeffs)) {
    normalize();
}

template <typename T>
void BasicPolynomial<T>::normalize() {
    while (coeffs_.size() > 1 && coeffs_.back() == T(0)) coeffs_.pop_back();
}

template <typename T>
T BasicPolynomial<T>::operator()(T x) const noexcept {
    T r = 0;
    for (auto it = coeffs_.rbegin(); it != coeffs_.rend(); ++it) r = r * x + *it;
    return r;
}

template <typename T>
std::complex<T> BasicPolynomial<T>::operator()(std::complex<T> z) const noexcept {
    std::complex<T> r = 0;
    for (auto it = coeffs_.rbegin(); it != coeffs_.rend(); ++it) r = r * z + *it;
    return r;
}

template <typename T>
BasicPolynomial<T> BasicPolynomial<T>::derivative() const {
    if (coeffs_.size() <= 1) return BasicPolynomial({T(0)});
    std::vector<T> d(coeffs_.size() - 1);
    for (std::size_t i = 1; i < coeffs_.size(); ++i) d[i - 1] = coeffs_[i] * static_cast<T>(i);
    return BasicPolynomial(std::move(d));
}

template <typename T>
BasicPolynomial<T> BasicPolynomial<T>::integral(T constant) const {
    std::vector<T> r(coeffs_.size() + 1);
    r[0] = constant;
    for (std::size_t i = 0; i < coeffs_.size(); ++i) r[i + 1] = coeffs_[i] / static_cast<T>(i + 1);
    return BasicPolynomial(std::move(r));
}

template <typename T>
BasicPolynomial<T> BasicPolynomial<T>::operator+(const BasicPolynomial& o) const {
    std::vector<T> r(std::max(coeffs_.size(), o.coeffs_.size()), T(0));
    for (std::size_t i = 0; i < coeffs_.size(); ++i) r[i] += coeffs_[i];
    for (std::size_t i = 0; i < o.coeffs_.size(); ++i) r[i] += o.coeffs_[i];
    return BasicPolynomial(std::move(r));
}

template <typename T>
BasicPolynomial<T> BasicPolynomial<T>::operator*(const BasicPolynomial& o) const {
    if (coeffs_.empty() || o.coeffs_.empty()) return BasicPolynomial();
    std::vector<T> r(coeffs_.size() + o.coeffs_.size() - 1, T(0));
    for (std::size_t i = 0; i < coeffs_.size(); ++i)
        for (std::size_t j = 0; j < o.coeffs_.size(); ++j) r[i + j] += coeffs_[i] * o.coeffs_[j];
    return BasicPolynomial(std::move(r));
}

template <typename T>
std::optional<T> BasicPolynomial<T>::newton_root(T x0, T tol, int max_iter) const {
    const BasicPolynomial d = derivative();
    T x = x0;
    for (int i = 0; i < max_iter; ++i) {
        const T fx = (*this)(x);
        const T dfx = d(x);
        if (dfx == T(0)) return std::nullopt;
        const T step = fx / dfx;
        x -= step;
        if (std::abs(step) <= tol * std::max(T(1), std::abs(x))) return x;
    }
    return std::nullopt;
}

template <typename T>
std::vector<std::complex<T>> BasicPolynomial<T>::all_roots(int max_iter) const {
    const std::size_t n = degree();
    if (n == 0 || coeffs_.back() == T(0)) return {};
    // Monic form; start from powers of a complex number that is not a root of unity.
    std::vector<std::complex<T>> monic(coeffs_.size());
    for (std::size_t i = 0; i < coeffs_.size(); ++i) monic[i] = coeffs_[i] / coeffs_.back();
    auto eval = [&](std::complex<T> z) {
        std::complex<T> r = 0;
        for (auto it = monic.rbegin(); it != monic.rend(); ++it) r = r * z + *it;
        return r;
    };
    std::vector<std::complex<T>> z(n);
    const std::complex<T> seed(T(0.4), T(0.9));
    z[0] = 1;
    for (std::size_t i = 1; i < n; ++i) z[i] = z[i - 1] * seed;
    const T eps = std::numeric_limits<T>::epsilon() * T(64);
    for (int it = 0; it < max_iter; ++it) {
        T change = 0;
        for (std::size_t i = 0; i < n; ++i) {
            std::complex<T> denom = 1;
            for (std::size_t j = 0; j < n; ++j)
                if (j != i) denom *= z[i] - z[j];
            const std::complex<T> delta = eval(z[i]) / denom;
            z[i] -= delta;
            change = std::max(change, std::abs(delta));
        }
        if (change <= eps) break;
    }
    for (auto& r : z) {  // snap tiny imaginary parts of real roots
        if (std::abs(r.imag()) <= std::sqrt(eps) * std::max(T(1), std::abs(r.real()))) r.imag(T(0));
    }
    std::sort(z.begin(), z.end(), [](const std::complex<T>& a, const std::complex<T>& b) {
        return a.real() != b.real() ? a.real() < b.real() : a.imag() < b.imag();
    });
    return z;
}

template <typename T>
std::string BasicPolynomial<T>::to_string() const {
    std::ostringstream os;
    bool first = true;
    for (std::size_t i = coeffs_.size(); i-- > 0;) {
        const T c = coeffs_[i];
        if (c == T(0) && coeffs_.size() > 1) continue;
        if (!first) os << (c < T(0) ? " - " : " + ");
        else if (c < T(0)) os << '-';
        const T a = std::abs(c);
        if (a != T(1) || i == 0) os << a;
        if (i >= 1) os << 'x';
        if (i >= 2) os << '^' << i;
        first = false;
    }
    return first ? "0" : os.str();
}

template class BasicPolynomial<float>;
template class BasicPolynomial<double>;
template class BasicPolynomial<long double>;

}  // namespace nativecore::numeric
