#pragma once
// Non-cryptographic hashes and checksums.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nativecore::hash {

std::uint32_t fnv1a32(const void* data, std::size_t len) noexcept;
std::uint64_t fnv1a64(const void* data, std::size_t len) noexcept;

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320). Pass the previous result as
// `crc` to continue a running checksum.
std::uint32_t crc32(const void* data, std::size_t len, std::uint32_t crc = 0) noexcept;

class Crc32 {
public:
    void update(const void* data, std::size_t len) noexcept { value_ = crc32(data, len, value_); }
    void update(std::string_view s) noexcept { update(s.data(), s.size()); }
    std::uint32_t value() const noexcept { return value_; }

private:
    std::uint32_t value_ = 0;
};

std::uint32_t adler32(const void* data, std::size_t len, std::uint32_t adler = 1) noexcept;
std::uint32_t murmur3_32(const void* data, std::size_t len, std::uint32_t seed) noexcept;
std::uint32_t xxh32(const void* data, std::size_t len, std::uint32_t seed) noexcept;

inline std::uint32_t fnv1a32(std::string_view s) noexcept { return fnv1a32(s.data(), s.size()); }
inline std::uint64_t fnv1a64(std::string_view s) noexcept { return fnv1a64(s.data(), s.size()); }
inline std::uint32_t crc32(std::string_view s) noexcept { return crc32(s.data(), s.size()); }
inline std::uint32_t adler32(std::string_view s) noexcept { return adler32(s.data(), s.size()); }

}  // namespace nativecore::hash
