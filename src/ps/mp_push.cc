// mp_push.cc - multi-precision pushes on the wire (mp_push.h).
#include "ps/mp_push.h"

#include <memory>

#include "comm/comm.h"
#include "core/dtype.h"
#include "optimizer/optimizer.h"
#include "optimizer/recv_sum.h"

namespace kvstore {
namespace dist {

int RecvDTypeOfFloat16(const std::string& spec) {
  return CreateOptimizer(spec)->RecvDType(KV_FLOAT16);
}

void SumToFloat32(const std::vector<const Array*>& vals, Array* dst) {
  std::vector<std::unique_ptr<Array>> staged;
  const std::vector<const void*> srcs = HostAddresses(vals, &staged);
  optimizer::SumToFloat32(srcs.data(), static_cast<int>(srcs.size()), KV_FLOAT16,
                          static_cast<float*>(dst->data()), dst->size());
}

void SumMixedRound(const std::vector<const void*>& srcs, const std::vector<int>& src_dtypes,
                   void* dst, int dst_dtype, int64_t n) {
  const int num_srcs = static_cast<int>(srcs.size());
  if (dst_dtype == KV_FLOAT32) {
    optimizer::SumToFloat32(srcs.data(), src_dtypes.data(), num_srcs, static_cast<float*>(dst), n);
    return;
  }
  std::vector<float> sum(static_cast<size_t>(n));
  optimizer::SumToFloat32(srcs.data(), src_dtypes.data(), num_srcs, sum.data(), n);
  auto* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalf(sum[static_cast<size_t>(i)]);
}

}  // namespace dist
}  // namespace kvstore
