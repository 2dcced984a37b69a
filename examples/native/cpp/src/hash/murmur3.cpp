// MurmurHash3_x86_32 (Austin Appleby, public domain), little-endian reads.
#include "nativecore/hash.hpp"

namespace nativecore::hash {
namespace {

constexpr std::uint32_t rotl32(std::uint32_t x, int r) noexcept { return (x << r) | (x >> (32 - r)); }

constexpr std::uint32_t fmix32(std::uint32_t h) noexcept {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

inline std::uint32_t load_le32(const unsigned char* p) noexcept {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace

std::uint32_t murmur3_32(const void* data, std::size_t len, std::uint32_t seed) noexcept {
    constexpr std::uint32_t c1 = 0xcc9e2d51u;
    constexpr std::uint32_t c2 = 0x1b873593u;
    const auto* p = static_cast<const unsigned char*>(data);
    const std::size_t nblocks = len / 4;
    std::uint32_t h = seed;
    for (std::size_t i = 0; i < nblocks; ++i) {
        std::uint32_t k = load_le32(p + 4 * i);
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64u;
    }
    const unsigned char* tail = p + 4 * nblocks;
    std::uint32_t k = 0;
    switch (len & 3u) {
        case 3: k ^= static_cast<std::uint32_t>(tail[2]) << 16; [[fallthrough]];
        case 2: k ^= static_cast<std::uint32_t>(tail[1]) << 8; [[fallthrough]];
        case 1:
            k ^= tail[0];
            k *= c1;
            k = rotl32(k, 15);
            k *= c2;
            h ^= k;
            break;
        default: break;
    }
    h ^= static_cast<std::uint32_t>(len);
    return fmix32(h);
}

}  // namespace nativecore::hash
