#include "core/error.h"

#include <cstdarg>
#include <cstdio>

namespace kvstore {

std::string StrFormat(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int needed = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out;
  if (needed > 0) {
    out.resize(static_cast<size_t>(needed) + 1);
    std::vsnprintf(&out[0], out.size(), fmt, args);
    out.resize(static_cast<size_t>(needed));
  }
  va_end(args);
  return out;
}

void ThrowError(int code, const std::string& message) { throw Error(code, message); }

int ErrorCode(const std::exception& e) noexcept {
  const auto* err = dynamic_cast<const Error*>(&e);
  return err != nullptr ? err->code() : KV_ERR_INTERNAL;
}

}  // namespace kvstore
