// compression.cc - the compression setting (type, threshold) and the quantise/dequantise
// kernels of compression.h.
//
// The loops follow MXNet's gradient_compression-inl.h element for element. 1.9.1 has only the
// 2-bit type and checks threshold > 0 for every type; master adds 1-bit, checks t > 0 for 2-bit
// only, and runs one kernel thread per packed byte instead of per word. The packed bytes and
// residuals are the same either way; this file works per word, like 1.9.1.
#include "compression/compression.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/cpu/worker_pool.h"
#include "core/dtype.h"
#include "core/error.h"

namespace kvstore {
namespace compression {
namespace {

inline float Load(float v) { return v; }
inline float Load(half_t v) { return HalfToFloat(v.bits); }

// The 2-bit codes of bit pair j (0 = most significant) in a byte.
constexpr uint8_t kPos2[4] = {0xc0, 0x30, 0x0c, 0x03};
constexpr uint8_t kNeg2[4] = {0x80, 0x20, 0x08, 0x02};

// Packs values [16*w0, min(16*w1, n)) into words [w0, w1) of out. Every byte of those words
// is written (trailing pairs stay 00).
template <typename G>
void Quantize2Bit(const G* grad, float* residual, uint8_t* out, int64_t n, int64_t w0,
                  int64_t w1, float t) {
  const float neg = -t;
  for (int64_t w = w0; w < w1; ++w) {
    uint8_t* word = out + 4 * w;
    std::memset(word, 0, 4);
    const int64_t end = std::min(n, 16 * w + 16);
    for (int64_t i = 16 * w; i < end; ++i) {
      float r = residual[i] + Load(grad[i]);
      uint8_t* byte = word + ((i & 15) >> 2);
      if (r >= t) {
        *byte |= kPos2[i & 3];
        r -= t;
      } else if (r <= neg) {
        *byte |= kNeg2[i & 3];
        r -= neg;
      }
      residual[i] = r;
    }
  }
}

template <typename G>
void Quantize1Bit(const G* grad, float* residual, uint8_t* out, int64_t n, int64_t w0,
                  int64_t w1, float t) {
  for (int64_t w = w0; w < w1; ++w) {
    uint8_t* word = out + 4 * w;
    std::memset(word, 0, 4);
    const int64_t end = std::min(n, 32 * w + 32);
    for (int64_t i = 32 * w; i < end; ++i) {
      float r = residual[i] + Load(grad[i]);
      if (r > t) {
        word[(i & 31) >> 3] |= static_cast<uint8_t>(0x80u >> (i & 7));
        r -= 1;
      } else {
        r += 1;
      }
      residual[i] = r;
    }
  }
}

inline float Decode2Bit(const uint8_t* in, int64_t i, float t) {
  const uint8_t masked = in[4 * (i >> 4) + ((i & 15) >> 2)] & kPos2[i & 3];
  if (masked == kPos2[i & 3]) return t;
  if (masked == kNeg2[i & 3]) return -t;
  return 0.0f;
}

inline float Decode1Bit(const uint8_t* in, int64_t i) {
  return (in[4 * (i >> 5) + ((i & 31) >> 3)] & (0x80u >> (i & 7))) ? 1.0f : -1.0f;
}

inline void Store(float* out, int64_t i, float v, bool add) { out[i] = add ? out[i] + v : v; }
inline void Store(half_t* out, int64_t i, float v, bool add) {
  out[i].bits = FloatToHalf(add ? HalfToFloat(out[i].bits) + v : v);
}

template <typename O>
void Dequantize(Type type, float t, const uint8_t* in, O* out, int64_t i0, int64_t i1, bool add) {
  if (type == Type::kTwoBit) {
    for (int64_t i = i0; i < i1; ++i) Store(out, i, Decode2Bit(in, i, t), add);
  } else {
    for (int64_t i = i0; i < i1; ++i) Store(out, i, Decode1Bit(in, i), add);
  }
}

// float32 output: whole bytes through a table of their decoded values (values are packed in
// memory order, so byte k holds values per*k .. per*k + per - 1), the same values and the
// same additions as the scalar decoder; the ends and short ranges go through it.
void Dequantize(Type type, float t, const uint8_t* in, float* out, int64_t i0, int64_t i1, bool add) {
  const int per = type == Type::kTwoBit ? 4 : 8;  // values per byte
  if (i1 - i0 < 512) {
    Dequantize<float>(type, t, in, out, i0, i1, add);
    return;
  }
  float table[256][8];
  for (int b = 0; b < 256; ++b) {
    const uint8_t byte = static_cast<uint8_t>(b);
    for (int j = 0; j < per; ++j) {
      table[b][j] = type == Type::kTwoBit ? Decode2Bit(&byte, j, t) : Decode1Bit(&byte, j);
    }
  }
  const int64_t head = std::min(i1, (i0 + per - 1) / per * per);
  Dequantize<float>(type, t, in, out, i0, head, add);
  int64_t i = head;
  for (; i + per <= i1; i += per) {
    const float* v = table[in[i / per]];
    float* o = out + i;
    if (add) {
      for (int j = 0; j < per; ++j) o[j] += v[j];
    } else {
      for (int j = 0; j < per; ++j) o[j] = v[j];
    }
  }
  Dequantize<float>(type, t, in, out, i, i1, add);
}

// Runs fn(begin, end) over [0, n) in ranges aligned to `align`, on the worker pool when the
// traffic (bytes) is large enough, else inline.
template <typename Fn>
void ForRanges(int64_t n, int64_t align, size_t bytes, const Fn& fn) {
  WorkerPool& pool = WorkerPool::Instance();
  const int parts = bytes >= pool.parallel_min_bytes() ? pool.width() : 1;
  if (parts <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  pool.ParallelFor(parts, [&](int part) {
    int64_t begin = 0, end = 0;
    SplitRange(n, parts, part, align, &begin, &end);
    if (begin < end) fn(begin, end);
  });
}

void CheckFloatDType(int dtype, int64_t n, const char* what) {
  KV_CHECK(dtype == KV_FLOAT32 || dtype == KV_FLOAT16, KV_ERR_INVALID_ARGUMENT,
           "gradient compression: %s must be float32 or float16, not %s", what, DTypeName(dtype));
  KV_CHECK(n >= 0, KV_ERR_INVALID_ARGUMENT, "gradient compression: negative size %lld",
           static_cast<long long>(n));
}

// A whole-string decimal float32 in the C locale (a leading '+' allowed); false otherwise.
bool ParseFloat(const std::string& text, float* out) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') {
    ++first;
    if (first != last && (*first == '+' || *first == '-')) return false;
  }
  float value = 0;
  auto result = std::from_chars(first, last, value, std::chars_format::general);
  if (result.ec != std::errc() || result.ptr != last) return false;
  *out = value;
  return true;
}

}  // namespace

Compression Compression::Make(const std::string& type, float threshold) {
  KV_CHECK(std::isfinite(threshold), KV_ERR_INVALID_ARGUMENT,
           "gradient compression: threshold must be a finite number, not %g",
           static_cast<double>(threshold));
  if (type == "2bit") {
    KV_CHECK(threshold > 0, KV_ERR_INVALID_ARGUMENT,
             "gradient compression: threshold must be greater than 0 for 2bit compression, not %g",
             static_cast<double>(threshold));
    return Compression(Type::kTwoBit, threshold);
  }
  if (type == "1bit") return Compression(Type::kOneBit, threshold);
  KV_FAIL(KV_ERR_INVALID_ARGUMENT,
          "gradient compression: unknown type \"%s\" (expected \"2bit\" or \"1bit\")",
          type.substr(0, 64).c_str());
}

namespace {

// The "pull" parameter: "0" or "1", or a number equal to one of them ("1.0": bindings send
// numbers as decimal strings).
bool ParsePull(const std::string& v) {
  float x = -1;
  KV_CHECK(ParseFloat(v, &x) && (x == 0 || x == 1), KV_ERR_INVALID_ARGUMENT,
           "gradient compression: pull \"%s\" is neither \"0\" nor \"1\"", v.substr(0, 64).c_str());
  return x == 1;
}

}  // namespace

Compression Compression::FromParams(
    const std::vector<std::pair<std::string, std::string>>& params) {
  const std::string* type = nullptr;
  float threshold = kDefaultThreshold;
  bool pull = false;
  for (const auto& kv : params) {
    if (kv.first == "type") {
      type = &kv.second;
    } else if (kv.first == "threshold") {
      KV_CHECK(ParseFloat(kv.second, &threshold), KV_ERR_INVALID_ARGUMENT,
               "gradient compression: threshold \"%s\" is not a float32 number",
               kv.second.substr(0, 64).c_str());
    } else if (kv.first == "pull") {
      pull = ParsePull(kv.second);
    } else {
      KV_FAIL(KV_ERR_INVALID_ARGUMENT,
              "gradient compression: unknown parameter \"%s\" (expected \"type\", \"threshold\" or \"pull\")",
              kv.first.substr(0, 64).c_str());
    }
  }
  KV_CHECK(type != nullptr, KV_ERR_INVALID_ARGUMENT,
           "gradient compression: the parameter \"type\" is required");
  Compression c = Make(*type, threshold);
  KV_CHECK(!pull || c.type_ == Type::kTwoBit, KV_ERR_INVALID_ARGUMENT,
           "gradient compression: pull=1 needs type \"2bit\" (1bit moves every pulled value by +-1 "
           "on each pull, so a weight would never settle)");
  c.pull_ = pull;
  return c;
}

std::optional<Compression> Compression::FromParamsOrNone(
    const std::vector<std::pair<std::string, std::string>>& params) {
  const std::string* type = nullptr;
  for (const auto& kv : params) {
    if (kv.first == "type") type = &kv.second;
  }
  if (type == nullptr || *type != "none") return FromParams(params);
  for (const auto& kv : params) {
    float unused;
    KV_CHECK(kv.first == "type" || kv.first == "threshold" || kv.first == "pull",
             KV_ERR_INVALID_ARGUMENT,
             "gradient compression: unknown parameter \"%s\" (expected \"type\", \"threshold\" or \"pull\")",
             kv.first.substr(0, 64).c_str());
    if (kv.first == "pull") ParsePull(kv.second);
    KV_CHECK(kv.first != "threshold" || ParseFloat(kv.second, &unused), KV_ERR_INVALID_ARGUMENT,
             "gradient compression: threshold \"%s\" is not a float32 number",
             kv.second.substr(0, 64).c_str());
  }
  return std::nullopt;
}

bool Compression::Compresses(int dtype) { return dtype == KV_FLOAT32 || dtype == KV_FLOAT16; }

void Compression::Sum(const Source* s, int num, int64_t n, int src_dtype, void* dst,
                      int dst_dtype) {
  KV_CHECK(Compresses(src_dtype) && Compresses(dst_dtype) && num >= 1 && n >= 0,
           KV_ERR_INVALID_ARGUMENT, "compressed sum: %s sources into %s (%d sources, %lld values)",
           DTypeName(src_dtype), DTypeName(dst_dtype), num, static_cast<long long>(n));
  for (int i = 0; i < num; ++i) {
    KV_CHECK(s[i].dtype < 0 || Compresses(s[i].dtype), KV_ERR_INVALID_ARGUMENT,
             "compressed sum: a raw %s source", DTypeName(s[i].dtype));
  }
  std::vector<float> scratch;
  float* acc = static_cast<float*>(dst);
  if (dst_dtype != KV_FLOAT32) {
    scratch.resize(static_cast<size_t>(n));
    acc = scratch.data();
  }
  for (int i = 0; i < num; ++i) {
    if (s[i].packed != nullptr) {
      if (i == 0) s[i].packed->Dequantize(s[i].data, n, KV_FLOAT32, acc);
      else s[i].packed->DequantizeAdd(s[i].data, n, KV_FLOAT32, acc);
    } else if ((s[i].dtype >= 0 ? s[i].dtype : src_dtype) == KV_FLOAT32) {
      const auto* v = static_cast<const float*>(s[i].data);
      for (int64_t j = 0; j < n; ++j) acc[j] = i == 0 ? v[j] : acc[j] + v[j];
    } else {
      const auto* v = static_cast<const uint16_t*>(s[i].data);
      for (int64_t j = 0; j < n; ++j) acc[j] = i == 0 ? HalfToFloat(v[j]) : acc[j] + HalfToFloat(v[j]);
    }
  }
  if (dst_dtype == KV_FLOAT16) {
    auto* out = static_cast<uint16_t*>(dst);
    for (int64_t j = 0; j < n; ++j) out[j] = FloatToHalf(acc[j]);
  }
}

int64_t Compression::CompressedSize(int64_t n) const {
  const int64_t per = values_per_word();
  return (n + per - 1) / per;
}

void Compression::Quantize(const void* grad, int64_t n, int dtype, float* residual,
                           void* out) const {
  CheckFloatDType(dtype, n, "the gradient");
  auto* packed = static_cast<uint8_t*>(out);
  const int64_t per = values_per_word();
  const size_t bytes = static_cast<size_t>(n) * (DTypeSize(dtype) + 2 * sizeof(float));
  ForRanges(CompressedSize(n), 1, bytes, [&](int64_t w0, int64_t w1) {
    if (dtype == KV_FLOAT32) {
      auto* g = static_cast<const float*>(grad);
      if (per == 16) Quantize2Bit(g, residual, packed, n, w0, w1, threshold_);
      else Quantize1Bit(g, residual, packed, n, w0, w1, threshold_);
    } else {
      auto* g = static_cast<const half_t*>(grad);
      if (per == 16) Quantize2Bit(g, residual, packed, n, w0, w1, threshold_);
      else Quantize1Bit(g, residual, packed, n, w0, w1, threshold_);
    }
  });
}

void Compression::Dequantize(const void* in, int64_t n, int dtype, void* out) const {
  CheckFloatDType(dtype, n, "the output");
  auto* packed = static_cast<const uint8_t*>(in);
  ForRanges(n, 1, static_cast<size_t>(n) * DTypeSize(dtype), [&](int64_t i0, int64_t i1) {
    if (dtype == KV_FLOAT32) {
      compression::Dequantize(type_, threshold_, packed, static_cast<float*>(out), i0, i1, false);
    } else {
      compression::Dequantize(type_, threshold_, packed, static_cast<half_t*>(out), i0, i1, false);
    }
  });
}

void Compression::DequantizeAdd(const void* in, int64_t n, int dtype, void* acc) const {
  CheckFloatDType(dtype, n, "the accumulator");
  auto* packed = static_cast<const uint8_t*>(in);
  ForRanges(n, 1, 2 * static_cast<size_t>(n) * DTypeSize(dtype), [&](int64_t i0, int64_t i1) {
    if (dtype == KV_FLOAT32) {
      compression::Dequantize(type_, threshold_, packed, static_cast<float*>(acc), i0, i1, true);
    } else {
      compression::Dequantize(type_, threshold_, packed, static_cast<half_t*>(acc), i0, i1, true);
    }
  });
}

}  // namespace compression
}  // namespace kvstore
