// spec.cc - splits an optimizer spec string into a name and key=value pairs.
#include "optimizer/spec.h"

#include <charconv>
#include <cmath>
#include <cstddef>

#include "core/error.h"

namespace kvstore {
namespace optimizer {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

class Scanner {
 public:
  explicit Scanner(const std::string& text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  bool Accept(char c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  // An identifier ([A-Za-z_][A-Za-z0-9_]*), or fails naming `what`.
  std::string Identifier(const char* what) {
    if (!IsIdentStart(Peek())) Fail(StrFormat("expected %s", what));
    size_t begin = pos_;
    while (pos_ < text_.size() && IsIdentChar(text_[pos_])) ++pos_;
    return text_.substr(begin, pos_ - begin);
  }

  // The raw text of a value: everything up to ',' or ')' (or the end), trimmed.
  std::string ValueText() {
    size_t begin = pos_;
    while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')') ++pos_;
    size_t end = pos_;
    while (end > begin && IsSpace(text_[end - 1])) --end;
    return text_.substr(begin, end - begin);
  }

  size_t pos() const { return pos_; }

  [[noreturn]] void Fail(const std::string& what) const { FailAt(pos_, what); }
  [[noreturn]] void FailAt(size_t at, const std::string& what) const {
    KV_FAIL(KV_ERR_INVALID_ARGUMENT, "invalid optimizer spec \"%s\": %s at offset %zu",
            SpecExcerpt(text_).c_str(), what.c_str(), at);
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

std::string SpecExcerpt(const std::string& text) {
  constexpr size_t kMaxQuoted = 200;
  if (text.size() <= kMaxQuoted) return text;
  return text.substr(0, kMaxQuoted) + StrFormat("... (%zu bytes)", text.size());
}

bool ParseNumber(const std::string& text, double* out) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  // std::from_chars is locale-independent but, unlike strtod, rejects a leading '+'.
  if (first != last && *first == '+') {
    ++first;
    if (first != last && (*first == '+' || *first == '-')) return false;
  }
  double value = 0;
  auto result = std::from_chars(first, last, value, std::chars_format::general);
  if (result.ec != std::errc() || result.ptr != last || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

Spec ParseSpec(const std::string& text) {
  Scanner s(text);
  Spec spec;
  s.SkipSpace();
  spec.name = s.Identifier("an optimizer name");
  s.SkipSpace();
  if (s.Accept('(')) {
    s.SkipSpace();
    if (!s.Accept(')')) {
      for (;;) {
        SpecParam param;
        param.key = s.Identifier("a parameter name");
        s.SkipSpace();
        if (!s.Accept('=')) {
          s.Fail(StrFormat("expected '=' after '%s'", SpecExcerpt(param.key).c_str()));
        }
        s.SkipSpace();
        size_t value_at = s.pos();
        std::string raw = s.ValueText();
        if (!ParseNumber(raw, &param.value)) {
          s.FailAt(value_at, StrFormat("the value \"%s\" of '%s' is not a finite number",
                                       SpecExcerpt(raw).c_str(),
                                       SpecExcerpt(param.key).c_str()));
        }
        spec.params.push_back(std::move(param));
        if (s.Accept(')')) break;
        if (!s.Accept(',')) s.Fail("expected ',' or ')'");
        s.SkipSpace();
      }
    }
    s.SkipSpace();
  }
  if (!s.AtEnd()) s.Fail("unexpected text after the spec");
  return spec;
}

}  // namespace optimizer
}  // namespace kvstore
