// Oracle harness: asks a built llama.cpp (libllama.so) how it splits text and how it classifies
// code points, so that the expected data committed next to this file comes from llama.cpp itself.
// It is a development tool only; nothing in the crate builds or links it.
//
// Build (see gen_pretok_cases.py, which builds and runs it):
//   g++ -std=c++17 -O1 -I$LLAMA/src tools/llama_oracle.cpp -L$BUILD/bin -lllama -Wl,-rpath,$BUILD/bin
//
// Commands:
//   llama_oracle split    stdin: one line per case, "<hex regex>,<hex regex>,...\t<hex text>"
//                         stdout: one line per case, the byte lengths of the words, comma-separated
//   llama_oracle unicode  stdout: "F <start> <flags>" for each run of equal flags (category and
//                         whitespace bits), "L <cpt> <lower>" where tolower changes a code point,
//                         "N <cpt> <nfd>" where the NFD map changes it
#include "unicode.h"

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

static std::string unhex(const std::string & s) {
    std::string out;
    for (size_t i = 0; i + 1 < s.size(); i += 2) {
        out.push_back((char) std::stoi(s.substr(i, 2), nullptr, 16));
    }
    return out;
}

static int cmd_split() {
    std::string line;
    while (std::getline(std::cin, line)) {
        const size_t tab = line.find('\t');
        const std::string regexes_hex = line.substr(0, tab);
        const std::string text = unhex(line.substr(tab + 1));
        std::vector<std::string> regexes;
        size_t start = 0;
        while (start <= regexes_hex.size()) {
            size_t comma = regexes_hex.find(',', start);
            if (comma == std::string::npos) {
                comma = regexes_hex.size();
            }
            regexes.push_back(unhex(regexes_hex.substr(start, comma - start)));
            start = comma + 1;
        }
        std::string out;
        try {
            const auto words = unicode_regex_split(text, regexes, false);
            for (size_t i = 0; i < words.size(); ++i) {
                if (i) {
                    out += ',';
                }
                out += std::to_string(words[i].size());
            }
        } catch (const std::exception & e) {
            out = std::string("ERROR ") + e.what();
        }
        std::cout << out << '\n';
    }
    return 0;
}

static int cmd_unicode() {
    const uint32_t max_cpt = 0x110000;
    uint16_t prev = 0xFFFF;
    for (uint32_t cpt = 0; cpt < max_cpt + 16; ++cpt) {
        const uint16_t flags = unicode_cpt_flags_from_cpt(cpt).as_uint() & 0x01FF;
        if (flags != prev) {
            std::printf("F %u %u\n", cpt, flags);
            prev = flags;
        }
    }
    for (uint32_t cpt = 0; cpt < max_cpt; ++cpt) {
        const uint32_t lower = unicode_tolower(cpt);
        if (lower != cpt) {
            std::printf("L %u %u\n", cpt, lower);
        }
    }
    std::vector<uint32_t> all(max_cpt);
    for (uint32_t cpt = 0; cpt < max_cpt; ++cpt) {
        all[cpt] = cpt;
    }
    const auto nfd = unicode_cpts_normalize_nfd(all);
    for (uint32_t cpt = 0; cpt < max_cpt; ++cpt) {
        if (nfd[cpt] != cpt) {
            std::printf("N %u %u\n", cpt, nfd[cpt]);
        }
    }
    return 0;
}

int main(int argc, char ** argv) {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "split") {
        return cmd_split();
    }
    if (cmd == "unicode") {
        return cmd_unicode();
    }
    std::fprintf(stderr, "usage: %s split|unicode\n", argv[0]);
    return 2;
}
