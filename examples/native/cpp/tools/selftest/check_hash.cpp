#include <string>

#include "check.hpp"
#include "nativecore/hash.hpp"

namespace selftest {

void check_hash(Checker& c) {
    namespace h = nativecore::hash;
    c.section("hash");
    c.expect_eq(h::fnv1a32(""), 0x811c9dc5u, "fnv1a32('')");
    c.expect_eq(h::fnv1a32("a"), 0xe40c292cu, "fnv1a32('a')");
    c.expect_eq(h::fnv1a32("foobar"), 0xbf9cf968u, "fnv1a32('foobar')");
    c.expect_eq(h::fnv1a64(""), 0xcbf29ce484222325ull, "fnv1a64('')");
    c.expect_eq(h::fnv1a64("foobar"), 0x85944171f73967e8ull, "fnv1a64('foobar')");
    c.expect_eq(h::crc32(""), 0u, "crc32('')");
    c.expect_eq(h::crc32("123456789"), 0xCBF43926u, "crc32('123456789')");
    c.expect_eq(h::crc32("The quick brown fox jumps over the lazy dog"), 0x414FA339u, "crc32(fox)");
    h::Crc32 running;
    running.update("The quick brown ");
    running.update("fox jumps over the lazy dog");
    c.expect_eq(running.value(), 0x414FA339u, "crc32 incremental == one-shot");
    c.expect_eq(h::adler32(""), 1u, "adler32('')");
    c.expect_eq(h::adler32("Wikipedia"), 0x11E60398u, "adler32('Wikipedia')");
    const std::string big(100000, 'x');
    c.expect_eq(h::adler32(big.data(), big.size()),
                h::adler32(big.data() + 50000, 50000, h::adler32(big.data(), 50000)), "adler32 chained over blocks");
    c.expect_eq(h::murmur3_32("", 0, 0), 0u, "murmur3('', 0)");
    c.expect_eq(h::murmur3_32("", 0, 1), 0x514E28B7u, "murmur3('', 1)");
    c.expect_eq(h::murmur3_32("test", 4, 0), 0xba6bd213u, "murmur3('test', 0)");
    c.expect_eq(h::murmur3_32("Hello, world!", 13, 1234), 0xfaf6cdb3u, "murmur3('Hello, world!', 1234)");
    const std::string fox = "The quick brown fox jumps over the lazy dog";
    c.expect_eq(h::murmur3_32(fox.data(), fox.size(), 0), 0x2e4ff723u, "murmur3(fox, 0)");
    c.expect_eq(h::xxh32("", 0, 0), 0x02CC5D05u, "xxh32('', 0)");
    c.expect_eq(h::xxh32("abc", 3, 0), 0x32D153FFu, "xxh32('abc', 0)");
    c.expect_eq(h::xxh32(fox.data(), fox.size(), 0), 0xE85EA4DEu, "xxh32(fox, 0)");
}

}  // namespace selftest
