#pragma once
// Dense row-major matrices. The template is defined in src/numeric/matrix.cpp and
// explicitly instantiated for float, double, long double and std::int64_t.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace nativecore::numeric {

template <typename T>
class Matrix {
public:
    Matrix() = default;
    Matrix(std::size_t rows, std::size_t cols, T fill = T{});
    Matrix(std::size_t rows, std::size_t cols, std::initializer_list<T> values);
    static Matrix identity(std::size_t n);

    std::size_t rows() const noexcept { return rows_; }
    std::size_t cols() const noexcept { return cols_; }
    bool square() const noexcept { return rows_ == cols_; }
    T& operator()(std::size_t r, std::size_t c) { return data_[r * cols_ + c]; }
    const T& operator()(std::size_t r, std::size_t c) const { return data_[r * cols_ + c]; }
    const std::vector<T>& data() const noexcept { return data_; }

    Matrix operator+(const Matrix& o) const;
    Matrix operator-(const Matrix& o) const;
    Matrix operator*(const Matrix& o) const;  // matrix product (blocked)
    Matrix operator*(T scalar) const;
    bool operator==(const Matrix& o) const;
    bool operator!=(const Matrix& o) const { return !(*this == o); }

    Matrix transpose() const;
    T trace() const;
    T frobenius_sq() const;
    bool approx_equal(const Matrix& o, T eps) const;
    void swap_rows(std::size_t a, std::size_t b);
    std::string to_string() const;

private:
    void require_same_shape(const Matrix& o, const char* op) const;
    std::size_t rows_ = 0;
    std::size_t cols_ = 0;
    std::vector<T> data_;
};

// matrix_ops.cpp
template <typename T> Matrix<T> matrix_pow(const Matrix<T>& m, unsigned exponent);
template <typename T> Matrix<T> hadamard(const Matrix<T>& a, const Matrix<T>& b);
template <typename T> Matrix<T> kronecker(const Matrix<T>& a, const Matrix<T>& b);
template <typename T> std::vector<T> mat_vec(const Matrix<T>& m, const std::vector<T>& v);

// lu.cpp (floating-point element types only)
template <typename T>
struct LuDecomposition {
    Matrix<T> lu;                   // L (unit diagonal, below) and U (on and above)
    std::vector<std::size_t> perm;  // row permutation
    int sign = 1;                   // parity of the permutation
    bool singular = false;
};
template <typename T> LuDecomposition<T> lu_decompose(const Matrix<T>& m);
template <typename T> T determinant(const Matrix<T>& m);
template <typename T> std::optional<std::vector<T>> solve(const Matrix<T>& a, const std::vector<T>& b);
template <typename T> std::optional<Matrix<T>> inverse(const Matrix<T>& m);

extern template class Matrix<float>;
extern template class Matrix<double>;
extern template class Matrix<long double>;
extern template class Matrix<std::int64_t>;

}  // namespace nativecore::numeric
