// mp_push.h - multi-precision pushes on the wire.
//
// Under an optimizer with multi_precision=1 every float16 key's updater receives the float32
// sum of the pushed values, each converted exactly (Updater::RecvDType, optimizer/recv_sum.h).
// A worker that pushes several values of such a key in one call (one per device, or the key
// repeated) must therefore not add them in float16 first: it sends their float32 sum instead
// (wire.h kFlagFloat32Sum, twice the bytes of a float16 value), and the server adds the
// workers' pushes, float16 values and float32 sums alike, in float32 in rank order. A single
// value still travels as float16 (its conversion is exact, so the server's conversion gives
// the same bits). With one worker the servers' sum is then bit for bit the `local` store's.
//
// The worker learns the rule from the spec it sent (SetOptimizer); a worker that never set
// the optimizer sends float16 sums as before. A server whose updater does not receive
// float16 keys in float32 refuses a float32 sum when it arrives; if the optimizer changes
// while a sync round waits, the round's float32 sums are rounded to float16 with the rest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/array.h"

namespace kvstore {
namespace dist {

// The dtype in which the servers' optimizer of `spec` receives float16 keys: KV_FLOAT32
// under multi_precision=1, else KV_FLOAT16. `spec` was checked (OptimizerSpec).
int RecvDTypeOfFloat16(const std::string& spec);

// Whether a push of `num_vals` values of a key of `dtype` travels as their float32 sum, when
// the servers' optimizer receives float16 keys in `recv_f16`.
inline bool SendsFloat32Sum(int dtype, size_t num_vals, int recv_f16) {
  return num_vals > 1 && dtype == KV_FLOAT16 && recv_f16 == KV_FLOAT32;
}

// dst (a host float32 array of the values' size) <- the float32 sum of the float16 `vals`
// (any devices), each converted exactly, added in order.
void SumToFloat32(const std::vector<const Array*>& vals, Array* dst);

// The sum of a sync round of `n` elements whose sources (host addresses, rank order) are
// float16 values or float32 sums (`src_dtypes`), into dst of `dst_dtype`: float32 for a
// multi-precision updater (optimizer::SumToFloat32), else float16, the float32 sum rounded
// once as CpuReduceSum rounds a float16 sum. dst may alias srcs[0] only for float16.
void SumMixedRound(const std::vector<const void*>& srcs, const std::vector<int>& src_dtypes,
                   void* dst, int dst_dtype, int64_t n);

}  // namespace dist
}  // namespace kvstore
