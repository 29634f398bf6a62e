// compression.h - gradient compression kernels: the reference's 2-bit and 1-bit quantisers
// with error feedback (a per-element residual), bit-exact with MXNet's
// src/kvstore/gradient_compression-inl.h, and their dequantisers.
//
// This layer only computes. The device store (store/compressed_reduce.h) and the dist stores
// (ps/compressed_push.h) keep the residuals and decide what is compressed.
//
// Formats (the packed output is a byte string; its length is CompressedSize(n) float32 words,
// i.e. 4 * CompressedSize(n) bytes, and bytes are numbered in memory order, so the layout does
// not depend on the host's endianness):
//   2bit  16 values per word. Value i lives in byte 4*(i/16) + (i%16)/4, in the bit pair
//         (i%4) counted from the most significant bit (masks 0xc0, 0x30, 0x0c, 0x03).
//         Codes: 11 -> +t, 10 -> -t, 00 -> 0 (01 is never written and reads as 0).
//   1bit  32 values per word. Value i lives in byte 4*(i/32) + (i%32)/8, bit 7-(i%8)
//         (most significant first). Codes: 1 -> +1, 0 -> -1, whatever the threshold.
// Bits past the last value in the final word are zero.
//
// Quantisation, per element, with r the residual and g the gradient (all in float32):
//   2bit  r += g; if r >= t: emit 11, r -= t; else if r <= -t: emit 10, r += t; else emit 00.
//   1bit  r += g; if r > t: emit 1, r -= 1; else emit 0, r += 1.
// So after any number of steps, sum(dequantised) + r == sum(g) up to float rounding.
//
// float16 gradients (beyond the reference, which compresses float32 only): each element is
// widened to float32 exactly and quantised as above; the residual stays float32, so no error
// is lost to half rounding. Dequantising into float16 rounds +-t to the nearest half.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kvstore {
namespace compression {

enum class Type { kTwoBit, kOneBit };

// One compression setting: a type and its threshold. Immutable once made; every method is
// const and may run concurrently on distinct arrays.
class Compression {
 public:
  // The reference's default threshold.
  static constexpr float kDefaultThreshold = 0.5f;

  // type is "2bit" or "1bit" (exact spelling). Throws INVALID_ARGUMENT for an unknown type,
  // a threshold that is not finite, or a 2-bit threshold <= 0 (the reference's CHECK). A 1-bit
  // threshold may be zero or negative (MXNet master; 1.9.1 has no 1-bit type).
  static Compression Make(const std::string& type, float threshold = kDefaultThreshold);

  // From key/value strings as SetGradientCompression receives them: "type" (required),
  // "threshold" (a decimal float32 in the C locale, whole string, default 0.5) and "pull"
  // ("0" or "1" or a number equal to one, default 0: also compress what dist stores pull,
  // ps/compressed_pull.h;
  // 2bit only, since 1bit moves every value by +-1 on each pull); a key given twice keeps
  // its last value. Throws INVALID_ARGUMENT naming the offending key or value, for an
  // unknown key too (the reference ignores unknown keys; a misspelt "threshold" would
  // silently use the default).
  static Compression FromParams(const std::vector<std::pair<std::string, std::string>>& params);
  // As FromParams, but "type": "none" means no compression (std::nullopt): how a store turns
  // compression off again. A threshold given with "none" must still be a float32 number.
  static std::optional<Compression> FromParamsOrNone(
      const std::vector<std::pair<std::string, std::string>>& params);
  // Whether `dtype` is compressed: KV_FLOAT32 and KV_FLOAT16 (the stores push other dtypes
  // uncompressed).
  static bool Compresses(int dtype);

  Type type() const { return type_; }
  float threshold() const { return threshold_; }
  // Whether pulls are compressed too (the "pull" parameter; Make gives false).
  bool pull() const { return pull_; }
  const char* type_name() const { return type_ == Type::kTwoBit ? "2bit" : "1bit"; }
  // Gradient values packed into one float32 word: 16 (2bit) or 32 (1bit).
  int values_per_word() const { return type_ == Type::kTwoBit ? 16 : 32; }

  // ceil(n / values_per_word()): the packed size of n values in float32 words. n >= 0.
  int64_t CompressedSize(int64_t n) const;

  // Quantises n values of grad (dtype KV_FLOAT32 or KV_FLOAT16) with error feedback into
  // residual (n float32, updated in place) and writes CompressedSize(n) words to out, which
  // must not overlap the other arrays. Throws INVALID_ARGUMENT for another dtype or n < 0,
  // before touching anything. Large arrays run on the CPU worker pool.
  void Quantize(const void* grad, int64_t n, int dtype, float* residual, void* out) const;

  // Writes the n dequantised values of in (CompressedSize(n) words) to out (dtype KV_FLOAT32
  // or KV_FLOAT16).
  void Dequantize(const void* in, int64_t n, int dtype, void* out) const;

  // acc[i] += dequantised value i, for summing compressed pushes on a server. For float16 acc
  // the sum is taken in float32 and rounded once.
  void DequantizeAdd(const void* in, int64_t n, int dtype, void* acc) const;

  // One value of a sum: `data` holds n values, packed by `packed` when it is not null, else
  // raw values of `dtype` (-1: the sum's src_dtype).
  struct Source {
    const void* data;
    const Compression* packed;
    int dtype = -1;
  };
  // The sum of compressed (and possibly raw) pushes, as the stores take it: dst (n values of
  // dst_dtype) = s[0] + s[1] + ... in float32, left to right, each packed source dequantised
  // exactly (+-t or +-1 in float32) and each raw one (float32 or float16) widened
  // exactly, then rounded once to dst_dtype (float32: no rounding; float16: to nearest
  // even). num >= 1; dst may be the first source's data when that one is raw (a server sums
  // in place in worker 0's message), and aliases no other source. Throws INVALID_ARGUMENT for a dtype other
  // than float32 or float16, before writing anything.
  static void Sum(const Source* s, int num, int64_t n, int src_dtype, void* dst, int dst_dtype);

 private:
  Compression(Type type, float threshold) : type_(type), threshold_(threshold) {}

  Type type_;
  float threshold_;
  bool pull_ = false;
};

}  // namespace compression
}  // namespace kvstore
