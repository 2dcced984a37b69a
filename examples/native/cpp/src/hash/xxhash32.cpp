// XXH32 (Yann Collet's xxHash, 32-bit variant), little-endian reads.
#include "nativecore/hash.hpp"

namespace nativecore::hash {
namespace {

constexpr std::uint32_t P1 = 0x9E3779B1u;
constexpr std::uint32_t P2 = 0x85EBCA77u;
constexpr std::uint32_t P3 = 0xC2B2AE3Du;
constexpr std::uint32_t P4 = 0x27D4EB2Fu;
constexpr std::uint32_t P5 = 0x165667B1u;

constexpr std::uint32_t rotl(std::uint32_t x, int r) noexcept { return (x << r) | (x >> (32 - r)); }

inline std::uint32_t read32(const unsigned char* p) noexcept {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

constexpr std::uint32_t round(std::uint32_t acc, std::uint32_t input) noexcept {
    acc += input * P2;
    acc = rotl(acc, 13);
    return acc * P1;
}

}  // namespace

std::uint32_t xxh32(const void* data, std::size_t len, std::uint32_t seed) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    const unsigned char* const end = p + len;
    std::uint32_t h;
    if (len >= 16) {
        const unsigned char* const limit = end - 16;
        std::uint32_t v1 = seed + P1 + P2;
        std::uint32_t v2 = seed + P2;
        std::uint32_t v3 = seed;
        std::uint32_t v4 = seed - P1;
        do {
            v1 = round(v1, read32(p));
            v2 = round(v2, read32(p + 4));
            v3 = round(v3, read32(p + 8));
            v4 = round(v4, read32(p + 12));
            p += 16;
        } while (p <= limit);
        h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    } else {
        h = seed + P5;
    }
    h += static_cast<std::uint32_t>(len);
    while (p + 4 <= end) {
        h += read32(p) * P3;
        h = rotl(h, 17) * P4;
        p += 4;
    }
    while (p < end) {
        h += static_cast<std::uint32_t>(*p) * P5;
        h = rotl(h, 11) * P1;
        ++p;
    }
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

}  // namespace nativecore::hash
