/*
 * The debug build's report of unfreed storage in a C++ program (docs/DEBUGGING.md): the
 * emergency pool libstdc++ allocates for exceptions as it is loaded, and never frees, is
 * not the program's. `cxx_unfreed clean` uses strings, vectors and an exception and
 * frees them all: no report. `cxx_unfreed leak` also leaves one 1,000-byte array: the
 * report names exactly those bytes. Run with the debug library preloaded by
 * tests/suites/statsdebug.sh, which reads the reports; the exit status says whether the
 * program's own work came out right (and, as for every plain test program, whether lfheap
 * was its allocator: tests/testutil.h).
 */
#include "testutil.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

/* Where the leaked array stays reachable, so that the compiler cannot leave it out. */
char *volatile kept;

int main(int argc, char **argv)
{
    bool leak = argc > 1 && std::strcmp(argv[1], "leak") == 0;
    std::vector<std::string> words;
    for (int i = 0; i < 100; i++)
        words.push_back(std::string(static_cast<size_t>(i) + 20, static_cast<char>('a' + i % 26)));
    size_t caught = 0;
    try {
        throw std::runtime_error(words[99]);
    } catch (const std::runtime_error &e) {
        caught = std::strlen(e.what());
    }
    if (leak) {
        kept = new char[1000];
        std::memset(kept, 1, 1000);
    }
    return words[50].size() == 70 && caught == 119 ? 0 : 1;
}
