// Unsigned big integers in base 10^9.
#include <algorithm>

#include "nativecore/numeric.hpp"

namespace nativecore::numeric {
namespace {
constexpr std::uint32_t kBase = 1'000'000'000u;
}

BigUint::BigUint(std::uint64_t v) {
    while (v) {
        limbs_.push_back(static_cast<std::uint32_t>(v % kBase));
        v /= kBase;
    }
}

std::optional<BigUint> BigUint::parse(std::string_view s) {
    if (s.empty()) return std::nullopt;
    for (const char c : s)
        if (c < '0' || c > '9') return std::nullopt;
    BigUint r;
    for (std::size_t end = s.size(); end > 0;) {
        const std::size_t start = end >= 9 ? end - 9 : 0;
        std::uint32_t limb = 0;
        for (std::size_t i = start; i < end; ++i) limb = limb * 10 + static_cast<std::uint32_t>(s[i] - '0');
        r.limbs_.push_back(limb);
        end = start;
    }
    r.trim();
    return r;
}

void BigUint::trim() {
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
}

BigUint BigUint::operator+(const BigUint& o) const {
    BigUint r;
    const std::size_t n = std::max(limbs_.size(), o.limbs_.size());
    r.limbs_.resize(n);
    std::uint32_t carry = 0;
    for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t s = carry;
        if (i < limbs_.size()) s += limbs_[i];
        if (i < o.limbs_.size()) s += o.limbs_[i];
        r.limbs_[i] = static_cast<std::uint32_t>(s % kBase);
        carry = static_cast<std::uint32_t>(s / kBase);
    }
    if (carry) r.limbs_.push_back(carry);
    return r;
}

BigUint BigUint::operator*(const BigUint& o) const {
    if (limbs_.empty() || o.limbs_.empty()) return BigUint();
    std::vector<std::uint64_t> acc(limbs_.size() + o.limbs_.size() + 1, 0);
    for (std::size_t i = 0; i < limbs_.size(); ++i) {
        std::uint64_t carry = 0;
        for (std::size_t j = 0; j < o.limbs_.size() || carry; ++j) {
            std::uint64_t cur = acc[i + j] + carry;
            if (j < o.limbs_.size()) cur += static_cast<std::uint64_t>(limbs_[i]) * o.limbs_[j];
            acc[i + j] = cur % kBase;
            carry = cur / kBase;
        }
    }
    BigUint r;
    r.limbs_.assign(acc.begin(), acc.end());
    r.trim();
    return r;
}

BigUint BigUint::mul_small(std::uint32_t m) const {
    BigUint r;
    if (m == 0) return r;
    r.limbs_.reserve(limbs_.size() + 1);
    std::uint64_t carry = 0;
    for (const std::uint32_t limb : limbs_) {
        const std::uint64_t cur = static_cast<std::uint64_t>(limb) * m + carry;
        r.limbs_.push_back(static_cast<std::uint32_t>(cur % kBase));
        carry = cur / kBase;
    }
    while (carry) {
        r.limbs_.push_back(static_cast<std::uint32_t>(carry % kBase));
        carry /= kBase;
    }
    return r;
}

bool BigUint::operator<(const BigUint& o) const noexcept {
    if (limbs_.size() != o.limbs_.size()) return limbs_.size() < o.limbs_.size();
    return std::lexicographical_compare(limbs_.rbegin(), limbs_.rend(), o.limbs_.rbegin(), o.limbs_.rend());
}

std::size_t BigUint::digits() const { return to_string().size(); }

std::string BigUint::to_string() const {
    if (limbs_.empty()) return "0";
    std::string s = std::to_string(limbs_.back());
    for (std::size_t i = limbs_.size() - 1; i-- > 0;) {
        const std::string part = std::to_string(limbs_[i]);
        s.append(9 - part.size(), '0');
        s += part;
    }
    return s;
}

BigUint factorial(unsigned n) {
    BigUint r(1);
    for (unsigned i = 2; i <= n; ++i) r = r.mul_small(i);
    return r;
}

BigUint fibonacci(unsigned n) {
    BigUint a(0), b(1);
    for (unsigned i = 0; i < n; ++i) {
        BigUint c = a + b;
        a = std::move(b);
        b = std::move(c);
    }
    return a;
}

}  // namespace nativecore::numeric
