// recv_sum.h - the sum of a key's pushed values in the dtype its updater receives when
// that differs from the stored dtype (Updater::RecvDType): float16 values under a
// multi-precision optimizer are summed in float32 and handed over unrounded.
//
// The stores (store/local_store.cc) and the parameter server (ps/server_values.cc) call it
// in place of their same-dtype sum when the installed updater asks for float32; a
// distributed worker calls it to send several values of one float16 key as their float32
// sum (ps/mp_push.h), so that the server adds unrounded partial sums.
#pragma once

#include <cstdint>

namespace kvstore {
namespace optimizer {

// dst[i] = float(srcs[0][i]) + float(srcs[1][i]) + ... in float32, left to right in the
// order of `srcs`, for n elements of `src_dtype` (float16 or float32; a float32 source is
// read as is). Every source is converted exactly, so the only roundings are the float32
// additions: the result is the reference's "cast each gradient to float32, sum in
// float32". `srcs` are host addresses, num_srcs >= 1; `dst` may not alias a source. Large
// arrays are split over the CPU worker pool (elements are independent: the bits do not
// depend on the split). Never throws.
void SumToFloat32(const void* const* srcs, int num_srcs, int src_dtype, float* dst, int64_t n);

// The same with a dtype per source (src_dtypes[k] is float16 or float32): a server's round
// in which some workers sent float16 values and others the float32 sum of several. Since
// conversion is exact, a float16 source gives the same bits in either overload.
void SumToFloat32(const void* const* srcs, const int* src_dtypes, int num_srcs, float* dst,
                  int64_t n);

}  // namespace optimizer
}  // namespace kvstore
