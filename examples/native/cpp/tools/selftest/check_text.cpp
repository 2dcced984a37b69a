#include <string>
#include <vector>

#include "check.hpp"
#include "nativecore/io.hpp"
#include "nativecore/text.hpp"
#include "nativecore/tokenizer.hpp"

namespace selftest {

void check_text(Checker& c) {
    namespace t = nativecore::text;
    namespace io = nativecore::io;
    c.section("strutil");
    c.expect_eq(t::trim("  \tabc \n"), std::string_view("abc"), "trim");
    c.expect_eq(t::split("a,,b", ',').size(), 3u, "split keeps empty fields");
    c.expect_eq(t::split("a,,b", ',', false).size(), 2u, "split drops empty fields");
    c.expect_eq(t::join(t::split_whitespace("  one two\tthree "), "-"), std::string("one-two-three"), "split_whitespace+join");
    c.expect_eq(t::to_upper("MiXeD 1"), std::string("MIXED 1"), "to_upper");
    c.expect(t::starts_with("nativecore", "native") && t::ends_with("nativecore", "core"), "starts_with/ends_with");
    c.expect_eq(t::replace_all("aaa", "a", "bb"), std::string("bbbbbb"), "replace_all");
    c.expect_eq(t::regex_replace_all("v1.2.3 and v10.0.1", R"(v(\d+)\.(\d+)\.\d+)", "$1.$2"),
                std::string("1.2 and 10.0"), "regex_replace_all with groups");
    c.expect(t::regex_find_all("a=1, bb=22, c=", R"(\w+=\d+)") == std::vector<std::string>{"a=1", "bb=22"},
             "regex_find_all");
    c.expect_eq(t::collapse_whitespace("  lots \t of\n\n space  "), std::string("lots of space"),
                "collapse_whitespace");

    c.section("utf8");
    const std::string s = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80";  // héllo € 😀
    c.expect(t::utf8_valid(s), "valid utf-8");
    c.expect_eq(t::utf8_length(s).value_or(0), 9u, "code point count");
    c.expect(!t::utf8_valid("\xC0\xAF"), "overlong rejected");
    c.expect(!t::utf8_valid("\xED\xA0\x80"), "surrogate rejected");
    c.expect_eq(t::utf8_encode(t::utf8_decode(s).value()), s, "decode/encode round trip");

    c.section("distance");
    c.expect_eq(t::levenshtein("kitten", "sitting"), 3u, "levenshtein(kitten, sitting)");
    c.expect_eq(t::levenshtein("", "abc"), 3u, "levenshtein('', abc)");
    c.expect_eq(t::osa_distance("ca", "ac"), 1u, "osa transposition");

    c.section("encoding");
    c.expect_eq(t::base64_encode("foobar"), std::string("Zm9vYmFy"), "base64(foobar)");
    c.expect_eq(t::base64_encode("fo"), std::string("Zm8="), "base64(fo)");
    c.expect_eq(t::base64_decode("Zm9vYg==").value_or("?"), std::string("foob"), "unbase64");
    c.expect(!t::base64_decode("Zm=v").has_value(), "bad base64 rejected");
    c.expect_eq(t::hex_encode("\x01\xAB"), std::string("01ab"), "hex");
    c.expect_eq(t::hex_decode("01AB").value_or("?"), std::string("\x01\xAB"), "unhex");

    c.section("search");
    const auto hits = t::find_all("abababa", "aba");
    c.expect(hits == std::vector<std::size_t>{0, 2, 4}, "kmp overlapping matches");
    const auto top = t::top_words("the cat and The dog and THE bird", 2);
    c.expect(top.size() == 2 && top[0].first == "the" && top[0].second == 3 && top[1].first == "and",
             "top_words");
    const char* prose = "It's a truth universally acknowledged, that a single man in possession of a good "
                        "fortune, must be in want of a wife. IT'S 1813; it's Austen.";
    c.expect(t::top_words(prose, 5) == t::top_words_matching(prose, 5, "[A-Za-z0-9']+"),
             "top_words == regex top_words");
    const auto caps = t::top_words_matching(prose, 10, "\\b[A-Z][a-z]+\\b");
    c.expect(caps.size() == 2 && caps[0].first == "austen" && caps[1].first == "it", "top_words_matching pattern");
    c.expect(t::glob_match("*.tar.gz", "x.tar.gz") && !t::glob_match("*.tar.gz", "x.tgz"), "glob *");
    c.expect(t::glob_match("file[0-9]?.txt", "file7a.txt") && !t::glob_match("file[!0-9].txt", "file7.txt"),
             "glob classes");
    for (const char* pat : {"a*b?c", "[abc]*", "*x*y*", "\\*lit"}) {
        for (const char* str : {"aXXbYc", "cab", "axby", "*lit", "abc"}) {
            c.expect(t::glob_match(pat, str) == t::glob_match_regex(pat, str), "glob == regex glob");
        }
    }

    c.section("tokenizer");
    const auto toks = t::tokenize("for (int i = 0x1F; i <= 10; ++i) { s += \"a\\n\"; } /* end */");
    c.expect_eq(toks.size(), 20u, "token count");
    c.expect(toks[0].kind == t::TokenKind::Keyword && toks[3].kind == t::TokenKind::Identifier, "token kinds");
    c.expect_eq(toks[5].text, std::string("0x1F"), "hex literal");
    c.expect_eq(toks[8].text, std::string("<="), "longest operator");
    c.expect(toks[17].kind == t::TokenKind::String && toks[17].text == "a\n", "string escape");
    const char* sources[] = {
        "for (int i = 0x1F; i <= 10; ++i) { s += \"a\\n\"; } /* end */",
        "static const char* p = 'x'; a->b = c ? d : e.f; x <<= 2; y >>= 1;",
        "/* multi\nline */ while (n--) { total += .5e-3 * v[n]; } // trailing\nreturn total...;",
        "#define SQ(x) ((x)*(x))\nint a[3] = {1, 2, 3}; a::b; x##y; z != w && q || !r;",
    };
    bool same = true;
    for (const char* src : sources) {
        const auto hand = t::tokenize(src);
        const auto re = t::tokenize_regex(src);
        same = same && hand.size() == re.size();
        for (std::size_t i = 0; same && i < hand.size(); ++i) {
            same = hand[i].kind == re[i].kind && hand[i].text == re[i].text && hand[i].line == re[i].line &&
                   hand[i].column == re[i].column;
        }
    }
    c.expect(same, "hand-written tokenizer == regex tokenizer");
    bool threw = false;
    try {
        t::tokenize("x = \"open");
    } catch (const t::TokenizeError& e) {
        threw = e.line() == 1 && e.column() == 5;
    }
    c.expect(threw, "unterminated string error position");

    c.section("csv/json");
    const auto rows = io::parse_csv("a,\"b,c\",\"say \"\"hi\"\"\"\r\n1,2,3\n");
    c.expect(rows.size() == 2 && rows[0].size() == 3 && rows[0][1] == "b,c" && rows[0][2] == "say \"hi\"", "csv parse");
    c.expect_eq(io::write_csv(rows), std::string("a,\"b,c\",\"say \"\"hi\"\"\"\r\n1,2,3\r\n"), "csv write");
    const auto doc = io::parse_json(R"({"name":"nc","n":[1,2.5,-3e2],"ok":true,"u":"\u00e9\ud83d\ude00","z":null})");
    c.expect(doc.has_value(), "json parse");
    if (doc) {
        const auto* n = doc->get("n");
        c.expect(n && std::get<io::JsonArray>(n->v).size() == 3, "json array");
        c.expect_eq(std::get<std::string>(doc->get("u")->v), std::string("\xC3\xA9\xF0\x9F\x98\x80"), "json \\u escapes");
        c.expect_eq(io::to_json(*doc),
                    std::string("{\"name\":\"nc\",\"n\":[1,2.5,-300],\"ok\":true,\"u\":\"\xC3\xA9\xF0\x9F\x98\x80\",\"z\":null}"),
                    "json round trip");
    }
    c.expect(!io::parse_json("{\"a\":1,}").has_value(), "json trailing comma rejected");
    c.expect(!io::parse_json("[01]").has_value(), "json leading zero rejected");
}

}  // namespace selftest
