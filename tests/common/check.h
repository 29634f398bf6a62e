/* check.h - minimal assertion helpers shared by the C and C++ test programs.
 * CHECK records a failure and continues; the program ends with check_summary(), which prints
 * "N passed, N failed" and returns the exit status. */
#ifndef KVSTORE_TESTS_CHECK_H_
#define KVSTORE_TESTS_CHECK_H_

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int check_passed_ = 0;
static int check_failed_ = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (cond) {                                                            \
      ++check_passed_;                                                     \
    } else {                                                               \
      ++check_failed_;                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                      \
  } while (0)

/* Records `ok`; on failure prints file:line and the printf-style message. */
static inline void check_msg_(int ok, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void check_msg_(int ok, const char* file, int line, const char* fmt, ...) {
  va_list args;
  if (ok) {
    ++check_passed_;
    return;
  }
  ++check_failed_;
  fprintf(stderr, "%s:%d: ", file, line);
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fputc('\n', stderr);
}

/* CHECK_MSG(cond, "fmt", ...): CHECK with a printf-style message saying what went wrong. */
#define CHECK_MSG(cond, ...) check_msg_((cond) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)

/* Records whether `rc` equals `code` and, when `needle` is not NULL, whether the thread's
 * last error message `msg` contains it. */
static inline void check_err_(int rc, int code, const char* msg, const char* needle, const char* call,
                       const char* file, int line) {
  if (rc == code && (needle == NULL || strstr(msg, needle) != NULL)) {
    ++check_passed_;
  } else {
    ++check_failed_;
    fprintf(stderr, "%s:%d: %s returned %d (want %d), message \"%s\" (want \"%s\")\n", file, line,
            call, rc, code, msg, needle ? needle : "");
  }
}

/* Checks that `call` returns `code` with a last-error message containing `needle` (or any
 * message when `needle` is NULL). */
#define CHECK_ERR(call, code, needle)                                                        \
  do {                                                                                       \
    int rc_ = (call);                                                                        \
    check_err_(rc_, (code), KVGetLastError(), (needle), #call, __FILE__, __LINE__);          \
  } while (0)

#define CHECK_OK(call) CHECK_ERR(call, 0, NULL)

static inline int check_summary(void) {
  printf("%d passed, %d failed\n", check_passed_, check_failed_);
  return check_failed_ == 0 ? 0 : 1;
}

#endif /* KVSTORE_TESTS_CHECK_H_ */
