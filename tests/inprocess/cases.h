// cases.h - main() of an in-process test program: runs the case named by argv[1] (every
// case when none is named) and ends with check.h's summary. ctest runs one case per test, so
// each case has the whole ctest timeout and a failure names its case. Also the checks that
// every case makes: a message contains a text, a job ended cleanly.
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "../common/check.h"

// `text` (a std::string) contains `part` (a C string).
#define CHECK_HAS(text, part)                                                              \
  CHECK_MSG((text).find(part) != std::string::npos, "\"%s\" does not contain \"%s\"", \
            (text).c_str(), (part))

// Every node of the job (a JobResult) ended without an error.
#define CHECK_JOB_OK(result) \
  CHECK_MSG((result).ok(), "the job did not end cleanly:\n%s", (result).Describe().c_str())

namespace kvstore {
namespace inprocess {

struct Case {
  const char* name;
  void (*run)();
};

template <size_t N>
int RunCases(int argc, char** argv, const Case (&cases)[N]) {
  bool found = false;
  for (const Case& c : cases) {
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
    for (const Case& c : cases) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  return check_summary();
}

}  // namespace inprocess
}  // namespace kvstore
