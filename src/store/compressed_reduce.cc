// compressed_reduce.cc - the device store's compressed sum (compressed_reduce.h).
#include "store/compressed_reduce.h"

#include "comm/comm.h"
#include "core/error.h"

namespace kvstore {

std::vector<float>* GradientCompression::State::Residual(const void* key, int position, int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<float>& r = residuals_[{key, position}];
  if (r.empty()) r.assign(static_cast<size_t>(n), 0.0f);
  return &r;
}

void GradientCompression::State::Reduce(const void* key, const std::vector<const Array*>& vals,
                                        Array* dst) {
  const int64_t n = dst->size();
  const int dtype = vals[0]->dtype();
  std::vector<std::unique_ptr<Array>> staged;
  const std::vector<const void*> srcs = HostAddresses(vals, &staged);
  // All quantised first (each into its own packed buffer), then summed.
  std::vector<std::vector<float>> packed(vals.size());
  std::vector<compression::Compression::Source> sources;
  sources.reserve(vals.size());
  for (size_t j = 0; j < vals.size(); ++j) {
    packed[j].resize(static_cast<size_t>(c_.CompressedSize(n)));
    c_.Quantize(srcs[j], n, dtype, Residual(key, static_cast<int>(j), n)->data(), packed[j].data());
    sources.push_back({packed[j].data(), &c_});
  }
  if (dst->ctx().is_cpu()) {
    compression::Compression::Sum(sources.data(), static_cast<int>(sources.size()), n, dtype,
                                  dst->data(), dst->dtype());
    return;
  }
  std::unique_ptr<Array> host = Array::Create(dst->shape(), dst->dtype(), Context{});
  compression::Compression::Sum(sources.data(), static_cast<int>(sources.size()), n, dtype,
                                host->data(), dst->dtype());
  CopyArray(dst, *host);
}

}  // namespace kvstore
