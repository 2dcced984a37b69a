// Sieve of Eratosthenes, deterministic Miller-Rabin for 64-bit, Pollard's rho.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nativecore/numeric.hpp"

namespace nativecore::numeric {
namespace {

using u64 = std::uint64_t;
using u128 = unsigned __int128;

u64 mulmod(u64 a, u64 b, u64 m) noexcept { return static_cast<u64>(static_cast<u128>(a) * b % m); }

u64 powmod(u64 b, u64 e, u64 m) noexcept {
    u64 r = 1 % m;
    b %= m;
    while (e) {
        if (e & 1) r = mulmod(r, b, m);
        b = mulmod(b, b, m);
        e >>= 1;
    }
    return r;
}

u64 pollard_rho(u64 n) {
    if (n % 2 == 0) return 2;
    for (u64 c = 1;; ++c) {
        u64 x = 2, y = 2, d = 1;
        auto f = [&](u64 v) { return (mulmod(v, v, n) + c) % n; };
        while (d == 1) {
            x = f(x);
            y = f(f(y));
            d = gcd_u64(x > y ? x - y : y - x, n);
        }
        if (d != n) return d;
    }
}

void factor_into(u64 n, std::vector<u64>& out) {
    if (n == 1) return;
    if (is_prime(n)) {
        out.push_back(n);
        return;
    }
    const u64 d = pollard_rho(n);
    factor_into(d, out);
    factor_into(n / d, out);
}

}  // namespace

u64 gcd_u64(u64 a, u64 b) noexcept {
    while (b) {
        const u64 t = a % b;
        a = b;
        b = t;
    }
    return a;
}

std::vector<std::uint32_t> sieve(std::uint32_t limit) {
    std::vector<std::uint32_t> primes;
    if (limit < 2) return primes;
    std::vector<bool> composite(static_cast<std::size_t>(limit) + 1, false);
    for (std::uint64_t i = 2; i <= limit; ++i) {
        if (composite[i]) continue;
        primes.push_back(static_cast<std::uint32_t>(i));
        for (std::uint64_t j = i * i; j <= limit; j += i) composite[j] = true;
    }
    return primes;
}

bool is_prime(u64 n) noexcept {
    if (n < 2) return false;
    static constexpr u64 kSmall[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};
    for (const u64 p : kSmall) {
        if (n % p == 0) return n == p;
    }
    u64 d = n - 1;
    int s = 0;
    while ((d & 1) == 0) {
        d >>= 1;
        ++s;
    }
    for (const u64 a : kSmall) {  // these bases are deterministic for n < 3.3e24
        u64 x = powmod(a, d, n);
        if (x == 1 || x == n - 1) continue;
        bool composite = true;
        for (int r = 1; r < s; ++r) {
            x = mulmod(x, x, n);
            if (x == n - 1) {
                composite = false;
                break;
            }
        }
        if (composite) return false;
    }
    return true;
}

u64 nth_prime(std::uint32_t n) {
    if (n == 0) throw std::invalid_argument("nth_prime: n must be >= 1");
    if (n > 50'000'000u) throw std::out_of_range("nth_prime: n too large");
    // Rosser's bound p_n < n (ln n + ln ln n) for n >= 6.
    const double dn = n;
    const auto limit = n < 6 ? 13u : static_cast<std::uint32_t>(dn * (std::log(dn) + std::log(std::log(dn)))) + 1;
    const std::vector<std::uint32_t> p = sieve(limit);
    return p.at(n - 1);
}

std::vector<u64> factorize(u64 n) {
    std::vector<u64> out;
    if (n < 2) return out;
    for (const u64 p : {2ull, 3ull, 5ull, 7ull, 11ull, 13ull}) {
        while (n % p == 0) {
            out.push_back(p);
            n /= p;
        }
    }
    factor_into(n, out);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace nativecore::numeric
