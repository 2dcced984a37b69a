// Array kernels: a switch over dtypes selects a template instantiation per (dtype, op).
#include "nativecore/kernels.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

namespace nativecore::kernels {
namespace {

template <DType> struct TypeOf;
template <> struct TypeOf<DType::I8> { using type = std::int8_t; };
template <> struct TypeOf<DType::I16> { using type = std::int16_t; };
template <> struct TypeOf<DType::I32> { using type = std::int32_t; };
template <> struct TypeOf<DType::I64> { using type = std::int64_t; };
template <> struct TypeOf<DType::U8> { using type = std::uint8_t; };
template <> struct TypeOf<DType::U16> { using type = std::uint16_t; };
template <> struct TypeOf<DType::U32> { using type = std::uint32_t; };
template <> struct TypeOf<DType::U64> { using type = std::uint64_t; };
template <> struct TypeOf<DType::F32> { using type = float; };
template <> struct TypeOf<DType::F64> { using type = double; };

// Calls f(T{}) with the C++ type for a runtime dtype.
template <typename F>
decltype(auto) dispatch(DType t, F&& f) {
    switch (t) {
        case DType::I8: return f(std::int8_t{});
        case DType::I16: return f(std::int16_t{});
        case DType::I32: return f(std::int32_t{});
        case DType::I64: return f(std::int64_t{});
        case DType::U8: return f(std::uint8_t{});
        case DType::U16: return f(std::uint16_t{});
        case DType::U32: return f(std::uint32_t{});
        case DType::U64: return f(std::uint64_t{});
        case DType::F32: return f(float{});
        case DType::F64: return f(double{});
    }
    throw KernelError("unknown dtype");
}

// Wrapping integer arithmetic: do it in the unsigned counterpart (after promotion).
template <typename T, bool = std::is_floating_point_v<T>>
struct WideOf {
    using type = T;
};
template <typename T>
struct WideOf<T, false> {
    using type = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <typename T>
using Wide = typename WideOf<T>::type;

template <typename T> T wrap_add(T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b)); }
template <typename T> T wrap_sub(T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) - static_cast<Wide<T>>(b)); }
template <typename T> T wrap_mul(T a, T b) { return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b)); }
template <typename T> T wrap_neg(T a) { return static_cast<T>(Wide<T>(0) - static_cast<Wide<T>>(a)); }

template <typename T>
T safe_div(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        return a / b;
    } else {
        if (b == 0) return 0;
        if constexpr (std::is_signed_v<T>) {
            if (b == -1) return wrap_neg(a);  // avoids INT_MIN / -1
        }
        return static_cast<T>(a / b);
    }
}

template <typename T, UnaryOp Op>
void unary_loop(const T* __restrict in, T* __restrict out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const T x = in[i];
        if constexpr (Op == UnaryOp::Neg) {
            out[i] = wrap_neg(x);
        } else if constexpr (Op == UnaryOp::Abs) {
            if constexpr (std::is_floating_point_v<T>) out[i] = std::fabs(x);
            else if constexpr (std::is_signed_v<T>) out[i] = x < 0 ? wrap_neg(x) : x;
            else out[i] = x;
        } else if constexpr (Op == UnaryOp::Square) {
            out[i] = wrap_mul(x, x);
        } else if constexpr (Op == UnaryOp::Relu) {
            out[i] = x > T(0) ? x : T(0);
        } else {
            out[i] = static_cast<T>((T(0) < x) - (x < T(0)));
        }
    }
}

template <typename T, BinaryOp Op>
void binary_loop(const T* a, const T* b, T* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        if constexpr (Op == BinaryOp::Add) out[i] = wrap_add(a[i], b[i]);
        else if constexpr (Op == BinaryOp::Sub) out[i] = wrap_sub(a[i], b[i]);
        else if constexpr (Op == BinaryOp::Mul) out[i] = wrap_mul(a[i], b[i]);
        else if constexpr (Op == BinaryOp::Div) out[i] = safe_div(a[i], b[i]);
        else if constexpr (Op == BinaryOp::Min) out[i] = b[i] < a[i] ? b[i] : a[i];
        else out[i] = a[i] < b[i] ? b[i] : a[i];
    }
}

template <typename To, typename From>
To convert(From x) {
    if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
        if (std::isnan(x)) return 0;
        constexpr long double lo = static_cast<long double>(std::numeric_limits<To>::min());
        constexpr long double hi = static_cast<long double>(std::numeric_limits<To>::max());
        const long double v = x;
        if (v <= lo) return std::numeric_limits<To>::min();
        if (v >= hi) return std::numeric_limits<To>::max();
        return static_cast<To>(x);
    } else {
        return static_cast<To>(x);
    }
}

template <typename From, typename To>
void cast_loop(const From* in, To* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = convert<To>(in[i]);
}

template <typename T>
void cumsum_loop(const T* in, T* out, std::size_t n) {
    T acc{};
    for (std::size_t i = 0; i < n; ++i) {
        acc = wrap_add(acc, in[i]);
        out[i] = acc;
    }
}

template <typename T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                               std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>>;

template <typename T, ReduceOp Op>
double reduce_loop(const T* in, std::size_t n) {
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean || Op == ReduceOp::SumSquares) {
        if (Op == ReduceOp::Mean && n == 0) return kNaN;
        Acc<T> acc{};
        for (std::size_t i = 0; i < n; ++i) {
            const Acc<T> x = static_cast<Acc<T>>(in[i]);
            acc = Op == ReduceOp::SumSquares ? wrap_add(acc, wrap_mul(x, x)) : wrap_add(acc, x);
        }
        const double total = static_cast<double>(acc);
        return Op == ReduceOp::Mean ? total / static_cast<double>(n) : total;
    } else if constexpr (Op == ReduceOp::Prod) {
        Acc<T> acc{1};
        for (std::size_t i = 0; i < n; ++i) acc = wrap_mul(acc, static_cast<Acc<T>>(in[i]));
        return static_cast<double>(acc);
    } else {
        if (n == 0) return kNaN;
        std::size_t best = 0;
        for (std::size_t i = 1; i < n; ++i) {
            if constexpr (Op == ReduceOp::Min || Op == ReduceOp::ArgMin) {
                if (in[i] < in[best]) best = i;
            } else {
                if (in[best] < in[i]) best = i;
            }
        }
        if constexpr (Op == ReduceOp::ArgMin || Op == ReduceOp::ArgMax) return static_cast<double>(best);
        else return static_cast<double>(in[best]);
    }
}

void require(const void* p, std::size_t n, const char* what) {
    if (!p && n) throw KernelError(std::string("null buffer: ") + what);
}

}  // namespace

std::size_t dtype_size(DType t) {
    return dispatch(t, [](auto v) { return sizeof(v); });
}

const char* dtype_name(DType t) noexcept {
    static constexpr const char* kNames[kNumDTypes] = {"int8",   "int16",  "int32",  "int64",   "uint8",
                                                       "uint16", "uint32", "uint64", "float32", "float64"};
    const int i = static_cast<int>(t);
    return i >= 0 && i < kNumDTypes ? kNames[i] : "?";
}

void unary(DType t, UnaryOp op, const void* in, void* out, std::size_t n) {
    require(in, n, "in");
    require(out, n, "out");
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        const T* x = static_cast<const T*>(in);
        T* y = static_cast<T*>(out);
        switch (op) {
            case UnaryOp::Neg: return unary_loop<T, UnaryOp::Neg>(x, y, n);
            case UnaryOp::Abs: return unary_loop<T, UnaryOp::Abs>(x, y, n);
            case UnaryOp::Square: return unary_loop<T, UnaryOp::Square>(x, y, n);
            case UnaryOp::Relu: return unary_loop<T, UnaryOp::Relu>(x, y, n);
            case UnaryOp::Sign: return unary_loop<T, UnaryOp::Sign>(x, y, n);
        }
        throw KernelError("unknown unary op");
    });
}

void binary(DType t, BinaryOp op, const void* a, const void* b, void* out, std::size_t n) {
    require(a, n, "a");
    require(b, n, "b");
    require(out, n, "out");
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        const T* x = static_cast<const T*>(a);
        const T* y = static_cast<const T*>(b);
        T* z = static_cast<T*>(out);
        switch (op) {
            case BinaryOp::Add: return binary_loop<T, BinaryOp::Add>(x, y, z, n);
            case BinaryOp::Sub: return binary_loop<T, BinaryOp::Sub>(x, y, z, n);
            case BinaryOp::Mul: return binary_loop<T, BinaryOp::Mul>(x, y, z, n);
            case BinaryOp::Div: return binary_loop<T, BinaryOp::Div>(x, y, z, n);
            case BinaryOp::Min: return binary_loop<T, BinaryOp::Min>(x, y, z, n);
            case BinaryOp::Max: return binary_loop<T, BinaryOp::Max>(x, y, z, n);
        }
        throw KernelError("unknown binary op");
    });
}

void cast(DType from, DType to, const void* in, void* out, std::size_t n) {
    require(in, n, "in");
    require(out, n, "out");
    dispatch(from, [&](auto from_tag) {
        using From = decltype(from_tag);
        dispatch(to, [&](auto to_tag) {
            using To = decltype(to_tag);
            cast_loop<From, To>(static_cast<const From*>(in), static_cast<To*>(out), n);
        });
    });
}

void cumsum(DType t, const void* in, void* out, std::size_t n) {
    require(in, n, "in");
    require(out, n, "out");
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        cumsum_loop<T>(static_cast<const T*>(in), static_cast<T*>(out), n);
    });
}

double reduce(DType t, ReduceOp op, const void* in, std::size_t n) {
    require(in, n, "in");
    return dispatch(t, [&](auto tag) -> double {
        using T = decltype(tag);
        const T* x = static_cast<const T*>(in);
        switch (op) {
            case ReduceOp::Sum: return reduce_loop<T, ReduceOp::Sum>(x, n);
            case ReduceOp::Prod: return reduce_loop<T, ReduceOp::Prod>(x, n);
            case ReduceOp::Min: return reduce_loop<T, ReduceOp::Min>(x, n);
            case ReduceOp::Max: return reduce_loop<T, ReduceOp::Max>(x, n);
            case ReduceOp::ArgMin: return reduce_loop<T, ReduceOp::ArgMin>(x, n);
            case ReduceOp::ArgMax: return reduce_loop<T, ReduceOp::ArgMax>(x, n);
            case ReduceOp::Mean: return reduce_loop<T, ReduceOp::Mean>(x, n);
            case ReduceOp::SumSquares: return reduce_loop<T, ReduceOp::SumSquares>(x, n);
        }
        throw KernelError("unknown reduce op");
    });
}

}  // namespace nativecore::kernels
