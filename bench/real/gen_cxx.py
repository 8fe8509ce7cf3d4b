"""Writes a C++ file that makes a C++ compiler allocate as a real code base does: the
standard library's containers, algorithms, regex, futures and streams included, and N
record types each instantiating maps, deques, lists, sorts and searches over them. The
same bytes every time. docs/BENCHMARKS.md ("Superblocks in freed runs") measures the
peak memory of `clang++ -O2 -g -std=c++17 -c` on it with each allocator.

    python3 gen_cxx.py N OUT.cc
"""

import sys

HEADERS = ["algorithm", "array", "atomic", "bitset", "chrono", "complex", "deque",
           "filesystem", "fstream", "functional", "future", "iomanip", "iostream", "list",
           "locale", "map", "memory", "mutex", "numeric", "optional", "queue", "random",
           "regex", "set", "sstream", "stack", "string", "thread", "tuple",
           "unordered_map", "unordered_set", "utility", "valarray", "variant", "vector"]


def record(i, out):
    out.append("struct R%d { std::string name; std::vector<int> v; "
               "std::map<int, std::string> m; };" % i)
    out.append("std::unordered_map<std::string, std::vector<R%d>> build%d(int n)" % (i, i))
    out.append("{")
    out.append("    std::unordered_map<std::string, std::vector<R%d>> by_name;" % i)
    out.append("    std::deque<R%d> queue;" % i)
    out.append("    std::list<R%d> list;" % i)
    out.append("    for (int k = 0; k < n; k++) {")
    out.append("        R%d r;" % i)
    out.append("        r.name = std::to_string(k * %d);" % (i + 1))
    out.append("        r.v.push_back(k);")
    out.append("        r.m[k] = r.name;")
    out.append("        queue.push_back(r);")
    out.append("        list.push_front(r);")
    out.append("        by_name[r.name].push_back(r);")
    out.append("    }")
    out.append("    std::sort(queue.begin(), queue.end(),")
    out.append("              [](const R%d &a, const R%d &b) { return a.name < b.name; });"
               % (i, i))
    out.append("    auto it = std::find_if(list.begin(), list.end(),")
    out.append("                           [](const R%d &a) { return a.v.size() > %d; });"
               % (i, i % 7))
    out.append("    if (it != list.end())")
    out.append("        by_name[\"found\"].push_back(*it);")
    out.append("    std::optional<std::tuple<int, R%d, std::string>> maybe;" % i)
    out.append("    std::set<std::pair<std::string, int>> seen{{\"r\", %d}};" % i)
    out.append("    return by_name;")
    out.append("}")


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: gen_cxx.py N OUT.cc")
    n = int(sys.argv[1])
    out = ["#include <%s>" % h for h in HEADERS]
    for i in range(n):
        record(i, out)
    out.append("int main()")
    out.append("{")
    out.append("    std::regex word(\"([a-z]+)([0-9]*)\");")
    out.append("    std::smatch match;")
    out.append("    std::string text = \"abc123\";")
    out.append("    std::regex_match(text, match, word);")
    out.append("    std::variant<int, std::string, double> value = 3.0;")
    out.append("    std::visit([](auto &&x) { std::cout << x << '\\n'; }, value);")
    out.append("    auto later = std::async(std::launch::async, [] { return 42; });")
    out.append("    std::ostringstream os;")
    out.append("    os << std::setw(10) << std::filesystem::path(\"/a/b\").filename();")
    out.append("    std::cout << later.get() << match.size() << os.str() << std::endl;")
    out.append("    size_t total = 0;")
    for i in range(n):
        out.append("    total += build%d(%d).size();" % (i, 3 + i % 5))
    out.append("    return total == 0;")
    out.append("}")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
