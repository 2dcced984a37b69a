#pragma once
// A minimal check harness for nativecore-selftest.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

namespace selftest {

class Checker {
public:
    explicit Checker(bool verbose) : verbose_(verbose) {}

    void section(const char* name) {
        section_ = name;
        if (verbose_) std::printf("== %s\n", name);
    }

    bool expect(bool ok, const char* what) {
        if (ok) {
            ++passed_;
            if (verbose_) std::printf("  ok   %s\n", what);
        } else {
            ++failed_;
            std::printf("  FAIL [%s] %s\n", section_.c_str(), what);
        }
        return ok;
    }

    template <typename A, typename B>
    bool expect_eq(const A& actual, const B& expected, const char* what) {
        const bool ok = actual == expected;
        if (!ok) {
            std::ostringstream os;
            os << what << ": got " << actual << ", expected " << expected;
            return expect(false, os.str().c_str());
        }
        return expect(true, what);
    }

    bool expect_near(double actual, double expected, double tol, const char* what) {
        const bool ok = std::abs(actual - expected) <= tol;
        if (!ok) {
            std::ostringstream os;
            os.precision(17);
            os << what << ": got " << actual << ", expected " << expected << " +- " << tol;
            return expect(false, os.str().c_str());
        }
        return expect(true, what);
    }

    int passed() const { return passed_; }
    int failed() const { return failed_; }

private:
    bool verbose_;
    std::string section_;
    int passed_ = 0;
    int failed_ = 0;
};

void check_hash(Checker& c);
void check_text(Checker& c);
void check_numeric(Checker& c);
void check_algo(Checker& c);

}  // namespace selftest
