// LU decomposition with partial pivoting; determinant, linear solve, inverse.
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "nativecore/matrix.hpp"

namespace nativecore::numeric {

template <typename T>
LuDecomposition<T> lu_decompose(const Matrix<T>& m) {
    if (!m.square()) throw std::invalid_argument("lu_decompose: non-square matrix");
    const std::size_t n = m.rows();
    LuDecomposition<T> d;
    d.lu = m;
    d.perm.resize(n);
    std::iota(d.perm.begin(), d.perm.end(), std::size_t{0});
    const T tiny = std::numeric_limits<T>::epsilon() * T(16);
    T scale = T(0);
    for (const T& x : m.data()) scale = std::max(scale, std::abs(x));
    for (std::size_t k = 0; k < n; ++k) {
        std::size_t pivot = k;
        T best = std::abs(d.lu(k, k));
        for (std::size_t i = k + 1; i < n; ++i) {
            const T v = std::abs(d.lu(i, k));
            if (v > best) {
                best = v;
                pivot = i;
            }
        }
        if (best <= tiny * scale || best == T(0)) {
            d.singular = true;
            continue;
        }
        if (pivot != k) {
            d.lu.swap_rows(pivot, k);
            std::swap(d.perm[pivot], d.perm[k]);
            d.sign = -d.sign;
        }
        for (std::size_t i = k + 1; i < n; ++i) {
            const T f = d.lu(i, k) / d.lu(k, k);
            d.lu(i, k) = f;
            for (std::size_t j = k + 1; j < n; ++j) d.lu(i, j) -= f * d.lu(k, j);
        }
    }
    return d;
}

template <typename T>
T determinant(const Matrix<T>& m) {
    const LuDecomposition<T> d = lu_decompose(m);
    if (d.singular) return T(0);
    T det = static_cast<T>(d.sign);
    for (std::size_t i = 0; i < m.rows(); ++i) det *= d.lu(i, i);
    return det;
}

template <typename T>
std::optional<std::vector<T>> solve(const Matrix<T>& a, const std::vector<T>& b) {
    if (a.rows() != b.size()) throw std::invalid_argument("solve: size mismatch");
    const LuDecomposition<T> d = lu_decompose(a);
    if (d.singular) return std::nullopt;
    const std::size_t n = a.rows();
    std::vector<T> x(n);
    for (std::size_t i = 0; i < n; ++i) {  // forward: L y = P b
        T s = b[d.perm[i]];
        for (std::size_t j = 0; j < i; ++j) s -= d.lu(i, j) * x[j];
        x[i] = s;
    }
    for (std::size_t i = n; i-- > 0;) {  // backward: U x = y
        T s = x[i];
        for (std::size_t j = i + 1; j < n; ++j) s -= d.lu(i, j) * x[j];
        x[i] = s / d.lu(i, i);
    }
    return x;
}

template <typename T>
std::optional<Matrix<T>> inverse(const Matrix<T>& m) {
    const std::size_t n = m.rows();
    Matrix<T> inv(n, n);
    for (std::size_t c = 0; c < n; ++c) {
        std::vector<T> e(n, T(0));
        e[c] = T(1);
        const auto col = solve(m, e);
        if (!col) return std::nullopt;
        for (std::size_t r = 0; r < n; ++r) inv(r, c) = (*col)[r];
    }
    return inv;
}

#define NC_INSTANTIATE_LU(T)                                                                   \
    template LuDecomposition<T> lu_decompose<T>(const Matrix<T>&);                             \
    template T determinant<T>(const Matrix<T>&);                                               \
    template std::optional<std::vector<T>> solve<T>(const Matrix<T>&, const std::vector<T>&);  \
    template std::optional<Matrix<T>> inverse<T>(const Matrix<T>&);

NC_INSTANTIATE_LU(float)
NC_INSTANTIATE_LU(double)
NC_INSTANTIATE_LU(long double)
#undef NC_INSTANTIATE_LU

}  // namespace nativecore::numeric
