// cases.h - main() of a C++ test program made of named cases: runs the case named by argv[1]
// (every case when none is named) and ends with check.h's summary. ctest runs one case per
// test, so each case has the whole ctest timeout and a failure names its case. A case that
// throws is a failure naming it; a case run alone that skipped (check_skip) returns ctest's
// skip status.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "check.h"

// `text` (a std::string) contains `part` (a C string).
#define CHECK_HAS(text, part)                                                              \
  CHECK_MSG((text).find(part) != std::string::npos, "\"%s\" does not contain \"%s\"", \
            (text).c_str(), (part))

struct TestCase {
  const char* name;
  void (*run)();
};

template <std::size_t N>
int RunCases(int argc, char** argv, const TestCase (&cases)[N]) {
  bool found = false;
  for (const TestCase& c : cases) {
    if (argc > 1 && std::strcmp(argv[1], c.name) != 0) continue;
    found = true;
    std::printf("case %s\n", c.name);
    std::fflush(stdout);
    try {
      c.run();
    } catch (const std::exception& e) {
      CHECK_MSG(0, "case %s threw: %s", c.name, e.what());
    }
  }
  if (!found) {
    std::fprintf(stderr, "unknown case %s; the cases are:", argv[1]);
    for (const TestCase& c : cases) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  const int status = check_summary();
  if (status != 0) return status;
  return argc > 1 && check_skipped() ? CHECK_SKIP_STATUS : 0;
}
