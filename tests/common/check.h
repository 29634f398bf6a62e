/* check.h - the assertion kit of every C and C++ test program (C99, also valid C++).
 *
 * Two kinds of assertion:
 *   - recording: CHECK, CHECK_MSG, CHECK_OK, CHECK_ERR, CHECK_NEAR count a pass or a
 *     failure and go on; a failure prints "file:line: what". main() ends with
 *     `return check_summary();`, which prints "N passed, N failed" and returns 1 when any
 *     check failed, else 0.
 *   - fatal: REQUIRE, REQUIRE_OK end the process with status 1 at the first failure,
 *     printing "FAIL file:line: what", for programs that cannot go on after one (a node of a
 *     distributed job, setup a test depends on, a benchmark).
 * A program that needs what it cannot have (a GPU) skips: SKIP_WITHOUT_GPU returns
 * CHECK_SKIP_STATUS (77) from main(), which ctest reports as skipped (SKIP_RETURN_CODE 77).
 * check_set_context("rank %d", r) puts a prefix on every failure line that follows.
 *
 * The counters are one pair per program (weak definitions, merged by the linker), so checks
 * in any of its source files count in its summary; they are updated atomically, so checks
 * may run on any thread. CHECK_OK, CHECK_ERR and REQUIRE_OK read the calling thread's
 * KVGetLastError() and KVErrorName() at the call site: a program that resolves the C ABI
 * itself (dlopen) may #define those names before using them. Array builders for tests
 * are in arrays.h beside this file. */
#ifndef KVSTORE_TESTS_COMMON_CHECK_H_
#define KVSTORE_TESTS_COMMON_CHECK_H_

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/kvstore.h"

#define CHECK_SKIP_STATUS 77

#define CHECK_PRINTF_(fmt_index) __attribute__((format(printf, fmt_index, fmt_index + 1)))

/* Shared by every translation unit of a program (see the top of the file). */
__attribute__((weak)) int check_passed_count_ = 0;
__attribute__((weak)) int check_failed_count_ = 0;
__attribute__((weak)) int check_skipped_ = 0;
__attribute__((weak)) char check_context_[128] = "";

static inline void check_count_(int ok) {
  __atomic_fetch_add(ok ? &check_passed_count_ : &check_failed_count_, 1, __ATOMIC_RELAXED);
}

/* Prints "<prefix><context: >file:line: <message>" as one write, so that lines of failures
 * on several threads do not interleave. */
static inline void check_vreport_(const char* prefix, const char* file, int line,
                                  const char* fmt, va_list args) {
  char message[4096];
  vsnprintf(message, sizeof message, fmt, args);
  fprintf(stderr, "%s%s%s%s:%d: %s\n", prefix, check_context_, check_context_[0] ? ": " : "",
          file, line, message);
}

/* Sets the prefix of the failure lines that follow (e.g. "rank 2"); "" removes it. */
static inline void check_set_context(const char* fmt, ...) CHECK_PRINTF_(1);
static inline void check_set_context(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(check_context_, sizeof check_context_, fmt, args);
  va_end(args);
}

/* Counts `ok`; on failure prints file:line and the printf-style message. */
static inline void check_record_(int ok, const char* file, int line, const char* fmt, ...)
    CHECK_PRINTF_(4);
static inline void check_record_(int ok, const char* file, int line, const char* fmt, ...) {
  va_list args;
  check_count_(ok);
  if (ok) return;
  va_start(args, fmt);
  check_vreport_("", file, line, fmt, args);
  va_end(args);
}

/* Prints "FAIL file:line: message" and ends the process with status 1. */
static inline void check_fail_(const char* file, int line, const char* fmt, ...)
    CHECK_PRINTF_(3) __attribute__((noreturn));
static inline void check_fail_(const char* file, int line, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  check_vreport_("FAIL ", file, line, fmt, args);
  va_end(args);
  exit(1);
}

static inline void check_err_(int rc, int code, const char* rc_name, const char* msg,
                              const char* needle, const char* call, const char* file,
                              int line) {
  check_record_(rc == code && (needle == NULL || strstr(msg, needle) != NULL), file, line,
                "%s returned %d (%s, want %d), message \"%s\" (want \"%s\")", call, rc, rc_name,
                code, msg, needle ? needle : "");
}

static inline void check_near_(double got, double want, double tol, const char* expr,
                               const char* file, int line) {
  double diff = got - want;
  if (diff < 0) diff = -diff;
  check_record_(diff <= tol, file, line, "%s = %.12g, want %.12g (tol %g)", expr, got, want,
                tol);
}

/* ---- recording: count and go on ---------------------------------------------------- */

/* CHECK(cond) */
#define CHECK(cond) check_record_((cond) ? 1 : 0, __FILE__, __LINE__, "CHECK failed: %s", #cond)

/* CHECK_MSG(cond, "fmt", ...): CHECK with a printf-style message saying what went wrong. */
#define CHECK_MSG(cond, ...) check_record_((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

/* `call` (a C ABI call) returns `code` and the thread's last error contains `needle`
 * (NULL: any message). */
#define CHECK_ERR(call, code, needle)                                                      \
  do {                                                                                     \
    const int check_rc_ = (call);                                                          \
    check_err_(check_rc_, (code), KVErrorName(check_rc_), KVGetLastError(), (needle), #call, \
               __FILE__, __LINE__);                                                        \
  } while (0)

/* `call` returns 0. */
#define CHECK_OK(call) CHECK_ERR(call, 0, NULL)

/* |got - want| <= tol, as doubles (NaN fails). */
#define CHECK_NEAR(got, want, tol) check_near_((got), (want), (tol), #got, __FILE__, __LINE__)

/* ---- fatal: exit 1 at the first failure -------------------------------------------- */

/* REQUIRE(cond, "fmt", ...). A requirement that holds is not counted: it is a
 * precondition of the checks that follow, not one of them. */
#define REQUIRE(cond, ...)                                      \
  do {                                                          \
    if (!(cond)) check_fail_(__FILE__, __LINE__, __VA_ARGS__);  \
  } while (0)

/* `call` (a C ABI call) returns 0; otherwise prints the code's name and the last error. */
#define REQUIRE_OK(call)                                                                  \
  do {                                                                                    \
    const int check_rc_ = (call);                                                         \
    REQUIRE(check_rc_ == 0, "%s -> %s: %s", #call, KVErrorName(check_rc_), KVGetLastError()); \
  } while (0)

/* ---- skipping and the summary ------------------------------------------------------ */

/* Notes that part of the program was skipped, printing "SKIP: <why>" on stdout. */
static inline void check_skip(const char* fmt, ...) CHECK_PRINTF_(1);
static inline void check_skip(const char* fmt, ...) {
  va_list args;
  char why[512];
  va_start(args, fmt);
  vsnprintf(why, sizeof why, fmt, args);
  va_end(args);
  printf("SKIP: %s\n", why);
  __atomic_store_n(&check_skipped_, 1, __ATOMIC_RELAXED);
}

/* Whether check_skip was called. */
static inline int check_skipped(void) { return __atomic_load_n(&check_skipped_, __ATOMIC_RELAXED); }

/* Sets `out_count` (an int) to the number of usable GPUs; with none, says so and returns
 * CHECK_SKIP_STATUS from the calling function (main). */
#define SKIP_WITHOUT_GPU(out_count)                                                \
  do {                                                                             \
    if (KVGetGpuCount(&(out_count)) != 0 || (out_count) == 0) {                    \
      check_skip("no usable GPU (KVGetGpuCount = %d)", (out_count));               \
      return CHECK_SKIP_STATUS;                                                    \
    }                                                                              \
  } while (0)

/* Prints "<name>: N passed, N failed" ("N passed, N failed" when name is NULL) and returns
 * the exit status: 1 when a check failed, else 0. */
static inline int check_summary_named(const char* name) {
  const int passed = __atomic_load_n(&check_passed_count_, __ATOMIC_RELAXED);
  const int failed = __atomic_load_n(&check_failed_count_, __ATOMIC_RELAXED);
  printf("%s%s%d passed, %d failed\n", name ? name : "", name ? ": " : "", passed, failed);
  return failed == 0 ? 0 : 1;
}

static inline int check_summary(void) { return check_summary_named(NULL); }

#endif /* KVSTORE_TESTS_COMMON_CHECK_H_ */
