// Adler-32 (RFC 1950), with the modulo deferred over blocks of 5552 bytes as zlib does.
#include "nativecore/hash.hpp"

namespace nativecore::hash {

std::uint32_t adler32(const void* data, std::size_t len, std::uint32_t adler) noexcept {
    constexpr std::uint32_t kMod = 65521u;
    constexpr std::size_t kBlock = 5552;
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint32_t a = adler & 0xFFFFu;
    std::uint32_t b = adler >> 16;
    while (len > 0) {
        std::size_t n = len < kBlock ? len : kBlock;
        len -= n;
        while (n--) {
            a += *p++;
            b += a;
        }
        a %= kMod;
        b %= kMod;
    }
    return (b << 16) | a;
}

}  // namespace nativecore::hash
