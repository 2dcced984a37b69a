/* nativecore C ABI. Everything else in the shared library is hidden.
 * All functions are thread-safe and never throw (C++ exceptions are caught at the boundary). */
#ifndef NATIVECORE_H
#define NATIVECORE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define NC_API __attribute__((visibility("default")))
#else
#define NC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Library version, e.g. "0.1.0". Static storage. */
NC_API const char* nc_version(void);

/* Hashes of a byte buffer (data may be NULL when len is 0). */
NC_API uint32_t nc_crc32(const void* data, size_t len);
NC_API uint32_t nc_adler32(const void* data, size_t len);
NC_API uint64_t nc_fnv1a64(const void* data, size_t len);
NC_API uint32_t nc_murmur3_32(const void* data, size_t len, uint32_t seed);
NC_API uint32_t nc_xxh32(const void* data, size_t len, uint32_t seed);

/* Linear algebra on row-major n x n matrices of doubles.
 * Return 0 on success, 1 if the matrix is singular, -1 on bad arguments. */
NC_API int nc_determinant(const double* m, size_t n, double* out);
NC_API int nc_solve(const double* a, const double* b, size_t n, double* x);

/* Statistics; NaN for an empty input (stddev: fewer than two values). */
NC_API double nc_mean(const double* v, size_t n);
NC_API double nc_stddev(const double* v, size_t n);
NC_API double nc_median(const double* v, size_t n);

/* Text. nc_count_tokens returns -1 when the text cannot be tokenized. */
NC_API size_t nc_levenshtein(const char* a, const char* b);
NC_API long nc_count_tokens(const char* src);

/* Number theory. nc_nth_prime(1) == 2; 0 for n == 0 or n too large. */
NC_API uint64_t nc_nth_prime(uint32_t n);
NC_API int nc_is_prime(uint64_t n);

/* n! in decimal. Writes at most buflen bytes including the NUL and returns the
 * number of digits (a return value >= buflen means the output was truncated). */
NC_API size_t nc_factorial_decimal(unsigned n, char* buf, size_t buflen);

/* Array kernels over raw buffers. dtype: 0 int8, 1 int16, 2 int32, 3 int64, 4 uint8,
 * 5 uint16, 6 uint32, 7 uint64, 8 float32, 9 float64.
 * reduce op: 0 sum, 1 prod, 2 min, 3 max, 4 argmin, 5 argmax, 6 mean, 7 sum of squares.
 * binary op: 0 add, 1 sub, 2 mul, 3 div, 4 min, 5 max (integers wrap; x / 0 == 0).
 * Return 0 on success, -1 on bad arguments. */
NC_API int nc_reduce(int dtype, int op, const void* data, size_t n, double* out);
NC_API int nc_binary(int dtype, int op, const void* a, const void* b, void* out, size_t n);
NC_API int nc_cast(int from_dtype, int to_dtype, const void* in, void* out, size_t n);

/* Runs the built-in known-answer checks; returns the number of failures (0 = good). */
NC_API int nc_selftest(void);

#ifdef __cplusplus
}
#endif

#endif /* NATIVECORE_H */
