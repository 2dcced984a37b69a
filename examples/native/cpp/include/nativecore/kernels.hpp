#pragma once
// Type-dispatched array kernels over raw buffers, in the style of a tensor library's
// dtype dispatch: each (dtype, op) pair is a separate template instantiation.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace nativecore::kernels {

enum class DType : int { I8 = 0, I16, I32, I64, U8, U16, U32, U64, F32, F64 };
enum class UnaryOp : int { Neg = 0, Abs, Square, Relu, Sign };
enum class BinaryOp : int { Add = 0, Sub, Mul, Div, Min, Max };
enum class ReduceOp : int { Sum = 0, Prod, Min, Max, ArgMin, ArgMax, Mean, SumSquares };

constexpr int kNumDTypes = 10;

std::size_t dtype_size(DType t);
const char* dtype_name(DType t) noexcept;

class KernelError : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// Integer arithmetic wraps (computed in the unsigned type); integer division by zero yields 0.
void unary(DType t, UnaryOp op, const void* in, void* out, std::size_t n);
void binary(DType t, BinaryOp op, const void* a, const void* b, void* out, std::size_t n);
// Numeric conversion with C++ semantics; float to integer saturates (NaN becomes 0).
void cast(DType from, DType to, const void* in, void* out, std::size_t n);
void cumsum(DType t, const void* in, void* out, std::size_t n);
// Reductions accumulate in double for floats and int64/uint64 (wrapping) for integers; the
// result is returned as double. ArgMin/ArgMax return the first index; an empty input gives
// NaN (0 for Sum, 1 for Prod).
double reduce(DType t, ReduceOp op, const void* in, std::size_t n);

}  // namespace nativecore::kernels
