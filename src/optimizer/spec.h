// spec.h - the syntax of an optimizer spec string: `name` or `name(key=value, ...)`.
//
// This layer knows nothing about which optimizers or parameters exist (optimizer.cc checks
// names and values against its table); it only splits the text. Whitespace is allowed
// around every token, values are decimal floating-point numbers read in the C locale
// whatever the process locale is, and an empty argument list `name()` is accepted.
#pragma once

#include <string>
#include <vector>

namespace kvstore {
namespace optimizer {

struct SpecParam {
  std::string key;
  double value = 0;
};

struct Spec {
  std::string name;               // as written (case preserved)
  std::vector<SpecParam> params;  // in the order written; duplicates are kept
};

// Splits `text`. Throws INVALID_ARGUMENT quoting the spec (SpecExcerpt) and saying what was expected at
// which character offset (a missing name, '=', ',' or ')', a value that is not a finite
// number, trailing text).
Spec ParseSpec(const std::string& text);

// `text` as an error message quotes it: whole when short, else its first 200 bytes
// followed by "... (N bytes)", so that a huge spec does not make a huge message.
std::string SpecExcerpt(const std::string& text);

// Parses one finite number in the C locale; the whole of `text` must be consumed.
// Returns false for anything else (empty, trailing characters, inf, nan, out of range).
bool ParseNumber(const std::string& text, double* out);

}  // namespace optimizer
}  // namespace kvstore
