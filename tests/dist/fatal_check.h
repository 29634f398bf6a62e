// fatal_check.h - assertions of the distributed test programs written in C++: the first
// failure prints its line and message and ends the process with status 1 (a node of a job
// cannot go on meaningfully after one). OK(call) checks a C ABI call returned 0.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond, ...)                                \
  do {                                                  \
    if (!(cond)) {                                      \
      std::fprintf(stderr, "FAIL line %d: ", __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                \
      std::fprintf(stderr, "\n");                       \
      std::exit(1);                                     \
    }                                                   \
  } while (0)

#define OK(call)                                                                \
  do {                                                                          \
    int rc_ = (call);                                                           \
    CHECK(rc_ == 0, "%s -> %s: %s", #call, KVErrorName(rc_), KVGetLastError()); \
  } while (0)
