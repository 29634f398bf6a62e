// error.h - the internal error type. Every failure inside the library is a kvstore::Error
// carrying one KV_ERR_* code and a message; src/c_api turns it into the return code and the
// thread's last-error text. Nothing else may escape an ABI function.
#pragma once

#include <exception>
#include <string>

#include "kvstore/kvstore_errors.h"

namespace kvstore {

class Error : public std::exception {
 public:
  Error(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

// printf-style formatting into a std::string.
std::string StrFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

[[noreturn]] void ThrowError(int code, const std::string& message);

// The KV_ERR_* code of a caught exception: its own for a kvstore::Error, KV_ERR_INTERNAL for
// anything else (std::bad_alloc included: callers that can name what ran out of memory catch
// it first).
int ErrorCode(const std::exception& e) noexcept;

}  // namespace kvstore

// KV_CHECK(cond, KV_ERR_X, "fmt", ...) throws kvstore::Error(KV_ERR_X, message) unless cond.
#define KV_CHECK(cond, code, ...)                                       \
  do {                                                                  \
    if (!(cond)) ::kvstore::ThrowError((code), ::kvstore::StrFormat(__VA_ARGS__)); \
  } while (0)

#define KV_FAIL(code, ...) ::kvstore::ThrowError((code), ::kvstore::StrFormat(__VA_ARGS__))
