// nativecore-selftest: runs known-answer checks over the whole library.
// Exit status 0 when every check passes. -v prints each check.
#include <cstdio>
#include <cstring>
#include <exception>

#include "check.hpp"
#include "nativecore/nativecore.h"

int main(int argc, char** argv) {
    bool verbose = false;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "-v") == 0 || std::strcmp(argv[i], "--verbose") == 0) {
            verbose = true;
        } else if (std::strcmp(argv[i], "--version") == 0) {
            std::printf("nativecore %s\n", nc_version());
            return 0;
        } else {
            std::fprintf(stderr, "usage: %s [-v|--verbose] [--version]\n", argv[0]);
            return 2;
        }
    }
    selftest::Checker c(verbose);
    try {
        selftest::check_hash(c);
        selftest::check_text(c);
        selftest::check_numeric(c);
        selftest::check_algo(c);
        c.section("c-abi");
        c.expect_eq(nc_selftest(), 0, "nc_selftest() reports no failures");
    } catch (const std::exception& e) {
        c.expect(false, e.what());
    }
    std::printf("nativecore %s selftest: %d passed, %d failed\n", nc_version(), c.passed(), c.failed());
    return c.failed() == 0 ? 0 : 1;
}
