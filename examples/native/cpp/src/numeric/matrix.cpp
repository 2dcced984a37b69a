// Matrix<T> definition and explicit instantiations.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "nativecore/matrix.hpp"

namespace nativecore::numeric {
namespace {

template <typename T>
T abs_diff(T a, T b) {
    return a > b ? a - b : b - a;
}

constexpr std::size_t kBlock = 32;

}  // namespace

template <typename T>
Matrix<T>::Matrix(std::size_t rows, std::size_t cols, T fill) : rows_(rows), cols_(cols), data_(rows * cols, fill) {}

template <typename T>
Matrix<T>::Matrix(std::size_t rows, std::size_t cols, std::initializer_list<T> values)
    : rows_(rows), cols_(cols), data_(values) {
    if (data_.size() != rows * cols) throw std::invalid_argument("Matrix: initializer size does not match shape");
}

template <typename T>
Matrix<T> Matrix<T>::identity(std::size_t n) {
    Matrix m(n, n);
    for (std::size_t i = 0; i < n; ++i) m(i, i) = T{1};
    return m;
}

template <typename T>
void Matrix<T>::require_same_shape(const Matrix& o, const char* op) const {
    if (rows_ != o.rows_ || cols_ != o.cols_) {
        throw std::invalid_argument(std::string("Matrix: shape mismatch in ") + op);
    }
}

template <typename T>
Matrix<T> Matrix<T>::operator+(const Matrix& o) const {
    require_same_shape(o, "+");
    Matrix r(*this);
    std::transform(r.data_.begin(), r.data_.end(), o.data_.begin(), r.data_.begin(), std::plus<T>());
    return r;
}

template <typename T>
Matrix<T> Matrix<T>::operator-(const Matrix& o) const {
    require_same_shape(o, "-");
    Matrix r(*this);
    std::transform(r.data_.begin(), r.data_.end(), o.data_.begin(), r.data_.begin(), std::minus<T>());
    return r;
}

template <typename T>
Matrix<T> Matrix<T>::operator*(const Matrix& o) const {
    if (cols_ != o.rows_) throw std::invalid_argument("Matrix: inner dimensions differ in *");
    Matrix r(rows_, o.cols_);
    // Cache-blocked i-k-j loop order.
    for (std::size_t ii = 0; ii < rows_; ii += kBlock) {
        for (std::size_t kk = 0; kk < cols_; kk += kBlock) {
            for (std::size_t jj = 0; jj < o.cols_; jj += kBlock) {
                const std::size_t ie = std::min(ii + kBlock, rows_);
                const std::size_t ke = std::min(kk + kBlock, cols_);
                const std::size_t je = std::min(jj + kBlock, o.cols_);
                for (std::size_t i = ii; i < ie; ++i) {
                    for (std::size_t k = kk; k < ke; ++k) {
                        const T a = (*this)(i, k);
                        for (std::size_t j = jj; j < je; ++j) r(i, j) += a * o(k, j);
                    }
                }
            }
        }
    }
    return r;
}

template <typename T>
Matrix<T> Matrix<T>::operator*(T scalar) const {
    Matrix r(*this);
    for (auto& x : r.data_) x *= scalar;
    return r;
}

template <typename T>
bool Matrix<T>::operator==(const Matrix& o) const {
    return rows_ == o.rows_ && cols_ == o.cols_ && data_ == o.data_;
}

template <typename T>
Matrix<T> Matrix<T>::transpose() const {
    Matrix r(cols_, rows_);
    for (std::size_t i = 0; i < rows_; ++i)
        for (std::size_t j = 0; j < cols_; ++j) r(j, i) = (*this)(i, j);
    return r;
}

template <typename T>
T Matrix<T>::trace() const {
    if (!square()) throw std::invalid_argument("Matrix: trace of a non-square matrix");
    T t{};
    for (std::size_t i = 0; i < rows_; ++i) t += (*this)(i, i);
    return t;
}

template <typename T>
T Matrix<T>::frobenius_sq() const {
    T s{};
    for (const T& x : data_) s += x * x;
    return s;
}

template <typename T>
bool Matrix<T>::approx_equal(const Matrix& o, T eps) const {
    if (rows_ != o.rows_ || cols_ != o.cols_) return false;
    for (std::size_t i = 0; i < data_.size(); ++i)
        if (abs_diff(data_[i], o.data_[i]) > eps) return false;
    return true;
}

template <typename T>
void Matrix<T>::swap_rows(std::size_t a, std::size_t b) {
    if (a == b) return;
    std::swap_ranges(data_.begin() + static_cast<std::ptrdiff_t>(a * cols_),
                     data_.begin() + static_cast<std::ptrdiff_t>((a + 1) * cols_),
                     data_.begin() + static_cast<std::ptrdiff_t>(b * cols_));
}

template <typename T>
std::string Matrix<T>::to_string() const {
    std::ostringstream os;
    os << '[';
    for (std::size_t i = 0; i < rows_; ++i) {
        os << (i ? ", [" : "[");
        for (std::size_t j = 0; j < cols_; ++j) {
            if (j) os << ", ";
            os << (*this)(i, j);
        }
        os << ']';
    }
    os << ']';
    return os.str();
}

template class Matrix<float>;
template class Matrix<double>;
template class Matrix<long double>;
template class Matrix<std::int64_t>;

}  // namespace nativecore::numeric
