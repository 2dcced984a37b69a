// FNV-1a, 32- and 64-bit (http://www.isthe.com/chongo/tech/comp/fnv/).
#include "nativecore/hash.hpp"

namespace nativecore::hash {
namespace {

template <typename U, U Offset, U Prime>
U fnv1a(const void* data, std::size_t len) noexcept {
    const auto* p = static_cast<const unsigned char*>(data);
    U h = Offset;
    for (std::size_t i = 0; i < len; ++i) {
        h ^= static_cast<U>(p[i]);
        h *= Prime;
    }
    return h;
}

}  // namespace

std::uint32_t fnv1a32(const void* data, std::size_t len) noexcept {
    return fnv1a<std::uint32_t, 0x811c9dc5u, 0x01000193u>(data, len);
}

std::uint64_t fnv1a64(const void* data, std::size_t len) noexcept {
    return fnv1a<std::uint64_t, 0xcbf29ce484222325ull, 0x00000100000001b3ull>(data, len);
}

}  // namespace nativecore::hash
