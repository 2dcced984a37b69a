// CRC-32 (IEEE), slicing-by-4 with tables computed at compile time.
#include <array>

#include "nativecore/hash.hpp"

namespace nativecore::hash {
namespace {

using Table = std::array<std::array<std::uint32_t, 256>, 4>;

constexpr Table make_tables() {
    Table t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i) {
        for (std::size_t s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
    }
    return t;
}

constexpr Table kTables = make_tables();
static_assert(kTables[0][1] == 0x77073096u, "CRC table");
static_assert(kTables[0][255] == 0x2D02EF8Du, "CRC table");

}  // namespace

std::uint32_t crc32(const void* data, std::size_t len, std::uint32_t crc) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint32_t c = ~crc;
    while (len >= 4) {
        c ^= static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
             (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
        c = kTables[3][c & 0xFFu] ^ kTables[2][(c >> 8) & 0xFFu] ^ kTables[1][(c >> 16) & 0xFFu] ^
            kTables[0][c >> 24];
        p += 4;
        len -= 4;
    }
    while (len--) c = kTables[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return ~c;
}

}  // namespace nativecore::hash
