// test_compression.cc - the gradient compression kernels (src/compression) against values
// computed by hand from the reference's rules, against a scalar model of the packed layout
// (every size around a word boundary, float16 gradients, a large array on the worker pool),
// the error-feedback invariant over many steps, and the setting's validation errors.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compression/compression.h"
#include "core/dtype.h"
#include "core/error.h"

extern "C" {
#include "../common/check.h"
}

using namespace kvstore;
using compression::Compression;

static std::vector<uint8_t> Bytes(const std::vector<float>& words) {
  std::vector<uint8_t> b(words.size() * 4);
  if (!b.empty()) std::memcpy(b.data(), words.data(), b.size());
  return b;
}

// 2-bit, t = 0.5, 17 values (two words): packed bytes and residuals after one and two steps,
// worked out by hand from "r += g; r >= t -> 11, r -= t; r <= -t -> 10, r += t; else 00".
static void test_two_bit_by_hand() {
  const Compression c = Compression::Make("2bit", 0.5f);
  const std::vector<float> g = {0.5f, -0.5f, 0.25f, -0.25f, 0.75f, -0.75f, 1.5f, 0.0f, 0.375f,
                                -0.125f, -1.0f, 0.5f, 0, 0, 0, 0, -0.5f};
  const int64_t n = static_cast<int64_t>(g.size());
  CHECK(c.CompressedSize(n) == 2);
  std::vector<float> r(n, 0.0f), out(2, 1234.0f);
  c.Quantize(g.data(), n, KV_FLOAT32, r.data(), out.data());
  CHECK(Bytes(out) == (std::vector<uint8_t>{0xe0, 0xec, 0x0b, 0x00, 0x80, 0x00, 0x00, 0x00}));
  CHECK(r == (std::vector<float>{0, 0, 0.25f, -0.25f, 0.25f, -0.25f, 1.0f, 0, 0.375f, -0.125f,
                                 -0.5f, 0, 0, 0, 0, 0, 0}));
  std::vector<float> deq(n, 99.0f);
  c.Dequantize(out.data(), n, KV_FLOAT32, deq.data());
  CHECK(deq == (std::vector<float>{0.5f, -0.5f, 0, 0, 0.5f, -0.5f, 0.5f, 0, 0, 0, -0.5f, 0.5f,
                                   0, 0, 0, 0, -0.5f}));
  c.Quantize(g.data(), n, KV_FLOAT32, r.data(), out.data());
  CHECK(Bytes(out) == (std::vector<uint8_t>{0xee, 0xec, 0xcb, 0x00, 0x80, 0x00, 0x00, 0x00}));
  CHECK(r == (std::vector<float>{0, 0, 0, 0, 0.5f, -0.5f, 2.0f, 0, 0.25f, -0.25f, -1.0f, 0, 0,
                                 0, 0, 0, 0}));
  // DequantizeAdd sums on top; the 01 code (never written) reads as 0.
  std::vector<float> acc(n, 1.0f);
  c.DequantizeAdd(out.data(), n, KV_FLOAT32, acc.data());
  CHECK(acc[0] == 1.5f && acc[1] == 0.5f && acc[3] == 0.5f && acc[7] == 1.0f);
  const uint8_t odd[4] = {0x40, 0, 0, 0};  // value 0 = 01
  float one = 7.0f;
  c.Dequantize(odd, 1, KV_FLOAT32, &one);
  CHECK(one == 0.0f);
}

// 1-bit, t = 0.5, 10 values: "r += g; r > t -> 1, r -= 1; else 0, r += 1", +-1 whatever t.
static void test_one_bit_by_hand() {
  const Compression c = Compression::Make("1bit", 0.5f);
  const std::vector<float> g = {0.75f, 0.5f, -0.25f, 1.0f, 0.0f, 2.0f, -3.0f, 0.625f, 0.25f, -0.5f};
  const int64_t n = static_cast<int64_t>(g.size());
  CHECK(c.CompressedSize(n) == 1);
  std::vector<float> r(n, 0.0f), out(1, 1234.0f);
  c.Quantize(g.data(), n, KV_FLOAT32, r.data(), out.data());
  CHECK(Bytes(out) == (std::vector<uint8_t>{0x95, 0x00, 0x00, 0x00}));
  CHECK(r == (std::vector<float>{-0.25f, 1.5f, 0.75f, 0, 1, 1, -2, -0.375f, 1.25f, 0.5f}));
  std::vector<float> deq(n);
  c.Dequantize(out.data(), n, KV_FLOAT32, deq.data());
  CHECK(deq == (std::vector<float>{1, -1, -1, 1, -1, 1, -1, 1, -1, -1}));
  c.Quantize(g.data(), n, KV_FLOAT32, r.data(), out.data());
  CHECK(Bytes(out) == (std::vector<uint8_t>{0x5c, 0x80, 0x00, 0x00}));
  CHECK(r == (std::vector<float>{1.5f, 1.0f, 1.5f, 0, 0, 2, -4, 1.25f, 0.5f, 1}));
  // A threshold of 5 changes which values emit 1, not what they dequantise to.
  const Compression c5 = Compression::Make("1bit", 5.0f);
  const float big[2] = {6.0f, 4.0f};
  float r2[2] = {0, 0}, w = 0;
  c5.Quantize(big, 2, KV_FLOAT32, r2, &w);
  float d[2];
  c5.Dequantize(&w, 2, KV_FLOAT32, d);
  CHECK(d[0] == 1.0f && d[1] == -1.0f && r2[0] == 5.0f && r2[1] == 5.0f);
}

// The scalar model of the layout in compression.h, written from the reference's description.
static void Model(const Compression& c, const std::vector<float>& g, std::vector<float>* r,
                  std::vector<uint8_t>* bytes) {
  const float t = c.threshold();
  bytes->assign(4 * c.CompressedSize(static_cast<int64_t>(g.size())), 0);
  for (size_t i = 0; i < g.size(); ++i) {
    float& x = (*r)[i];
    x += g[i];
    if (c.type() == compression::Type::kTwoBit) {
      uint8_t code = 0;
      if (x >= t) { code = 3; x -= t; } else if (x <= -t) { code = 2; x += t; }
      (*bytes)[4 * (i / 16) + (i % 16) / 4] |= static_cast<uint8_t>(code << (6 - 2 * (i % 4)));
    } else if (x > t) {
      (*bytes)[4 * (i / 32) + (i % 32) / 8] |= static_cast<uint8_t>(1u << (7 - i % 8));
      x -= 1;
    } else {
      x += 1;
    }
  }
}

// Three steps on random data against the model, float32 and float16 gradients (the latter
// widened exactly, so the model runs on the widened values), for sizes around word boundaries.
static bool MatchesModel(const Compression& c, int64_t n, bool half, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.5f * std::fabs(c.threshold()) + 0.1f);
  std::vector<float> r(n, 0.0f), rm(n, 0.0f), out(c.CompressedSize(n), 0.0f);
  std::vector<uint8_t> want;
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g(n);
    std::vector<half_t> gh(n);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = dist(rng);
      if (half) {
        gh[i].bits = FloatToHalf(g[i]);
        g[i] = HalfToFloat(gh[i].bits);
      }
    }
    if (half) c.Quantize(gh.data(), n, KV_FLOAT16, r.data(), out.data());
    else c.Quantize(g.data(), n, KV_FLOAT32, r.data(), out.data());
    Model(c, g, &rm, &want);
    if (Bytes(out) != want || r != rm) return false;
  }
  // The dequantised values of the last step, decoded from the model's bytes.
  std::vector<float> deq(n);
  c.Dequantize(out.data(), n, KV_FLOAT32, deq.data());
  const float t = c.threshold();
  for (int64_t i = 0; i < n; ++i) {
    float v;
    if (c.type() == compression::Type::kTwoBit) {
      const int code = (want[4 * (i / 16) + (i % 16) / 4] >> (6 - 2 * (i % 4))) & 3;
      v = code == 3 ? t : code == 2 ? -t : 0.0f;
    } else {
      v = (want[4 * (i / 32) + (i % 32) / 8] >> (7 - i % 8)) & 1 ? 1.0f : -1.0f;
    }
    if (deq[i] != v) return false;
  }
  return true;
}

static void test_layout_against_model() {
  const Compression cs[] = {Compression::Make("2bit", 0.5f), Compression::Make("2bit", 0.01f),
                            Compression::Make("1bit", 0.0f), Compression::Make("1bit", -0.3f)};
  const int64_t sizes[] = {0, 1, 3, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 1000};
  for (const Compression& c : cs) {
    for (int64_t n : sizes) {
      for (bool half : {false, true}) {
        CHECK_MSG(MatchesModel(c, n, half, static_cast<unsigned>(n * 7 + half)),
                  "%s t=%g n=%lld half=%d differs from the model", c.type_name(),
                  static_cast<double>(c.threshold()), static_cast<long long>(n), half);
      }
    }
    // 2 MiB of gradient crosses the default worker-pool bound (4 MiB of traffic).
    CHECK_MSG(MatchesModel(c, 500001, false, 5), "%s large array differs from the model",
              c.type_name());
  }
  CHECK(Compression::Make("2bit").CompressedSize(33) == 3);
  CHECK(Compression::Make("1bit").CompressedSize(33) == 2);
  CHECK(Compression::Make("1bit").CompressedSize(0) == 0);
}

// float16: hand values through the float32 residual, and float16 outputs (+-t rounded to half).
static void test_half() {
  const Compression c = Compression::Make("2bit", 0.1f);
  const half_t g[3] = {{FloatToHalf(0.0625f)}, {FloatToHalf(0.0625f)}, {FloatToHalf(-0.25f)}};
  float r[3] = {0, 0, 0.05f};
  float out = 0;
  c.Quantize(g, 3, KV_FLOAT16, r, &out);
  CHECK(Bytes({out}) == (std::vector<uint8_t>{0x08, 0, 0, 0}));  // 00 00 10 00
  CHECK(r[0] == 0.0625f && r[2] == 0.05f - 0.25f + 0.1f);
  half_t deq[3];
  c.Dequantize(&out, 3, KV_FLOAT16, deq);
  CHECK(deq[0].bits == 0 && deq[2].bits == FloatToHalf(-0.1f));
  half_t acc[3] = {{FloatToHalf(1.0f)}, {FloatToHalf(1.0f)}, {FloatToHalf(1.0f)}};
  c.DequantizeAdd(&out, 3, KV_FLOAT16, acc);
  CHECK(acc[0].bits == 0x3c00 && acc[2].bits == FloatToHalf(1.0f - 0.1f));
}

// Error feedback: after any number of steps, sum of dequantised + residual == sum of gradients.
// DequantizeAdd and Dequantize into float32 of long arrays (decoded a byte at a time through a
// table from 512 values on, and split over the worker pool at any element) against the
// packed bytes decoded one value at a time, on top of accumulators that are not zero.
static void test_long_dequantize_add() {
  for (const char* type : {"2bit", "1bit"}) {
    const Compression c = Compression::Make(type, 0.375f);
    for (int64_t n : {int64_t{511}, int64_t{512}, int64_t{513}, int64_t{1000}, int64_t{4099}, int64_t{1500001}}) {
      std::mt19937 rng(static_cast<unsigned>(n));
      std::vector<uint8_t> packed(4 * static_cast<size_t>(c.CompressedSize(n)));
      for (uint8_t& b : packed) b = static_cast<uint8_t>(rng());
      std::vector<float> acc(n), want(n), deq(n);
      for (int64_t i = 0; i < n; ++i) {
        acc[i] = 0.125f * static_cast<float>(i % 97) - 3.0f;
        float v;
        if (c.type() == compression::Type::kTwoBit) {
          const int code = (packed[i / 4] >> (6 - 2 * (i % 4))) & 3;
          v = code == 3 ? 0.375f : code == 2 ? -0.375f : 0.0f;
        } else {
          v = (packed[i / 8] >> (7 - i % 8)) & 1 ? 1.0f : -1.0f;
        }
        want[i] = acc[i] + v;
        deq[i] = v;
      }
      std::vector<float> got(n);
      c.Dequantize(packed.data(), n, KV_FLOAT32, got.data());
      CHECK_MSG(got == deq, "%s n=%lld: Dequantize differs", type, static_cast<long long>(n));
      c.DequantizeAdd(packed.data(), n, KV_FLOAT32, acc.data());
      CHECK_MSG(acc == want, "%s n=%lld: DequantizeAdd differs", type, static_cast<long long>(n));
    }
  }
}

static void test_round_trip() {
  for (const char* type : {"2bit", "1bit"}) {
    const Compression c = Compression::Make(type, 0.25f);
    const int64_t n = 37;
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.0f, 0.3f);
    std::vector<float> r(n, 0.0f), out(c.CompressedSize(n)), acc(n, 0.0f), g(n);
    std::vector<double> want(n, 0.0);
    for (int step = 0; step < 200; ++step) {
      for (int64_t i = 0; i < n; ++i) want[i] += g[i] = dist(rng);
      c.Quantize(g.data(), n, KV_FLOAT32, r.data(), out.data());
      c.DequantizeAdd(out.data(), n, KV_FLOAT32, acc.data());
    }
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(acc[i] + r[i] - want[i]));
    CHECK_MSG(worst < 1e-3, "%s: sum drifts by %g", type, worst);
  }
}

static std::string ErrorOf(void (*fn)()) {
  try {
    fn();
  } catch (const Error& e) {
    return std::to_string(e.code()) + ":" + e.what();
  }
  return "no error";
}

static bool Fails(void (*fn)(), const char* fragment) {
  const std::string e = ErrorOf(fn);
  const bool ok = e.rfind(std::to_string(KV_ERR_INVALID_ARGUMENT) + ":", 0) == 0 &&
                  e.find(fragment) != std::string::npos;
  if (!ok) fprintf(stderr, "got \"%s\", wanted \"%s\"\n", e.c_str(), fragment);
  return ok;
}

static void test_validation() {
  CHECK(Fails([] { Compression::Make("3bit"); }, "unknown type \"3bit\""));
  CHECK(Fails([] { Compression::Make("2BIT"); }, "unknown type"));
  CHECK(Fails([] { Compression::Make("2bit", 0.0f); }, "greater than 0 for 2bit"));
  CHECK(Fails([] { Compression::Make("2bit", -0.5f); }, "greater than 0 for 2bit"));
  CHECK(Fails([] { Compression::Make("1bit", NAN); }, "finite"));
  CHECK(Fails([] { Compression::Make("2bit", INFINITY); }, "finite"));
  CHECK(Compression::Make("1bit", 0.0f).threshold() == 0.0f);
  CHECK(Compression::Make("1bit", -1.0f).threshold() == -1.0f);
  CHECK(Compression::Make("2bit").threshold() == 0.5f);

  CHECK(Fails([] { Compression::FromParams({}); }, "\"type\" is required"));
  CHECK(Fails([] { Compression::FromParams({{"type", "2bit"}, {"threshold", "abc"}}); },
              "threshold \"abc\" is not a float32"));
  CHECK(Fails([] { Compression::FromParams({{"type", "2bit"}, {"threshold", "0.5x"}}); },
              "not a float32"));
  CHECK(Fails([] { Compression::FromParams({{"type", "2bit"}, {"threshold", "1e60"}}); },
              "not a float32"));
  CHECK(Fails([] { Compression::FromParams({{"type", "2bit"}, {"thresold", "1"}}); },
              "unknown parameter \"thresold\""));
  CHECK(Fails([] { Compression::FromParams({{"type", "2bit"}, {"threshold", "0"}}); },
              "greater than 0"));
  const Compression p = Compression::FromParams({{"type", "1bit"}, {"threshold", "+0.25"}});
  CHECK(p.type() == compression::Type::kOneBit && p.threshold() == 0.25f);
  CHECK(Compression::FromParams({{"type", "2bit"}}).threshold() == 0.5f);

  // A bad dtype changes nothing.
  CHECK(Fails([] {
    const double g[2] = {1, 1};
    float r[2] = {0, 0}, out = 0;
    Compression::Make("2bit").Quantize(g, 2, KV_FLOAT64, r, &out);
  }, "must be float32 or float16, not float64"));
  const double g[2] = {1, 1};
  float r[2] = {3, 3}, out = 9;
  try {
    Compression::Make("2bit").Quantize(g, 2, KV_FLOAT64, r, &out);
  } catch (const Error&) {
  }
  CHECK(r[0] == 3 && r[1] == 3 && out == 9);
  CHECK(Fails([] {
    float out[1] = {0};
    Compression::Make("1bit").Dequantize(out, 1, KV_INT32, out);
  }, "float32 or float16, not int32"));
}

int main() {
  test_two_bit_by_hand();
  test_one_bit_by_hand();
  test_layout_against_model();
  test_half();
  test_long_dequantize_add();
  test_round_trip();
  test_validation();
  return check_summary();
}
