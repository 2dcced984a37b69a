// Free functions over Matrix<T>.
#include <stdexcept>

#include "nativecore/matrix.hpp"

namespace nativecore::numeric {

template <typename T>
Matrix<T> matrix_pow(const Matrix<T>& m, unsigned exponent) {
    if (!m.square()) throw std::invalid_argument("matrix_pow: non-square matrix");
    Matrix<T> result = Matrix<T>::identity(m.rows());
    Matrix<T> base = m;
    while (exponent) {
        if (exponent & 1u) result = result * base;
        exponent >>= 1;
        if (exponent) base = base * base;
    }
    return result;
}

template <typename T>
Matrix<T> hadamard(const Matrix<T>& a, const Matrix<T>& b) {
    if (a.rows() != b.rows() || a.cols() != b.cols()) throw std::invalid_argument("hadamard: shape mismatch");
    Matrix<T> r(a.rows(), a.cols());
    for (std::size_t i = 0; i < a.rows(); ++i)
        for (std::size_t j = 0; j < a.cols(); ++j) r(i, j) = a(i, j) * b(i, j);
    return r;
}

template <typename T>
Matrix<T> kronecker(const Matrix<T>& a, const Matrix<T>& b) {
    Matrix<T> r(a.rows() * b.rows(), a.cols() * b.cols());
    for (std::size_t i = 0; i < a.rows(); ++i)
        for (std::size_t j = 0; j < a.cols(); ++j)
            for (std::size_t k = 0; k < b.rows(); ++k)
                for (std::size_t l = 0; l < b.cols(); ++l) r(i * b.rows() + k, j * b.cols() + l) = a(i, j) * b(k, l);
    return r;
}

template <typename T>
std::vector<T> mat_vec(const Matrix<T>& m, const std::vector<T>& v) {
    if (m.cols() != v.size()) throw std::invalid_argument("mat_vec: size mismatch");
    std::vector<T> r(m.rows(), T{});
    for (std::size_t i = 0; i < m.rows(); ++i)
        for (std::size_t j = 0; j < m.cols(); ++j) r[i] += m(i, j) * v[j];
    return r;
}

#define NC_INSTANTIATE_OPS(T)                                                     \
    template Matrix<T> matrix_pow<T>(const Matrix<T>&, unsigned);                 \
    template Matrix<T> hadamard<T>(const Matrix<T>&, const Matrix<T>&);           \
    template Matrix<T> kronecker<T>(const Matrix<T>&, const Matrix<T>&);          \
    template std::vector<T> mat_vec<T>(const Matrix<T>&, const std::vector<T>&);

NC_INSTANTIATE_OPS(float)
NC_INSTANTIATE_OPS(double)
NC_INSTANTIATE_OPS(long double)
NC_INSTANTIATE_OPS(std::int64_t)
#undef NC_INSTANTIATE_OPS

}  // namespace nativecore::numeric
