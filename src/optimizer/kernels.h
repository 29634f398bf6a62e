// kernels.h - the element loops of the built-in optimizers: one step of an optimizer over a
// host-memory range of weights, gradients and state.
//
// Each loop performs the reference's (MXNet 1.9.1) operations in the reference's order, so
// float32 and float64 results are the same bit for bit; kernels.cc is compiled with
// -ffp-contract=off (KVSTORE_KERNEL_OPTIONS), so no a*b+c is fused into one rounding.
// docs/OPTIMIZERS.md writes each rule out. The kernels never throw and never allocate: the
// updater (optimizer.cc) checks everything first and owns the state they read and write.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "optimizer/registry.h"

namespace kvstore {
namespace optimizer {

// The most state slots any optimizer keeps per key (centred rmsprop: n, g, delta).
constexpr int kMaxSlots = 3;
// The most float arrays a key's state holds: the slots, then a multi-precision master copy.
constexpr int kMaxStateArrays = kMaxSlots + 1;

// The type the arithmetic runs in for a weight of type W: float for float16 and float32,
// double for float64.
template <typename W> struct ComputeType { using type = float; };
template <> struct ComputeType<double> { using type = double; };

// The hyper-parameters of one step in the compute type (exact conversions of the
// OperatorValues; `lr` is adam's bias-corrected step size for this step).
template <typename C>
struct StepParams {
  C lr, wd, rescale, clip, momentum, beta1, beta2, eps, gamma1, gamma2, clip_w;
  bool clip_on;
};

// One update's state: the committed slots it reads and the staging slots it writes
// (null past the optimizer's NumSlots). Which slots exist also selects the variant: sgd and
// nag with momentum have slot 0, centred rmsprop has slot 2.
template <typename C>
struct Slots {
  const C* in[kMaxSlots] = {};
  C* out[kMaxSlots] = {};
  Slots Offset(int64_t begin) const {
    Slots s;
    for (int i = 0; i < kMaxSlots; ++i) {
      s.in[i] = in[i] ? in[i] + begin : nullptr;
      s.out[i] = out[i] ? out[i] + begin : nullptr;
    }
    return s;
  }
};

// Applies one step of `kind` to n elements: reads w, g and the committed state, writes w
// and the staging state. Instantiated for (float, float), (double, double) and
// (half_t, float).
template <typename W, typename C>
void ApplyKernel(Kind kind, const StepParams<C>& p, W* w, const W* g, const Slots<C>& s,
                 int64_t n);

extern template void ApplyKernel<float, float>(Kind, const StepParams<float>&, float*,
                                               const float*, const Slots<float>&, int64_t);
extern template void ApplyKernel<double, double>(Kind, const StepParams<double>&, double*,
                                                 const double*, const Slots<double>&, int64_t);
extern template void ApplyKernel<half_t, float>(Kind, const StepParams<float>&, half_t*,
                                                const half_t*, const Slots<float>&, int64_t);

// The lazy update of n elements of pushed rows (Updater::UpdateRows) for kind sgd or adam:
// the reference's kernels for a dense weight and a row_sparse gradient. sgd with momentum
// (SGDMomDnsRspDnsKernel) is the dense sgd rule; sgd without momentum (SGDDnsRspKernel) is
// sgd_update's order, w = (1 - lr*wd)*w - lr*clip(rescale*g, c); adam (AdamDnsRspDnsKernel)
// is the dense rule except that with clipping on the variance adds (1-beta2)*(g'*g').
// Instantiated like ApplyKernel.
template <typename W, typename C>
void ApplyRowsKernel(Kind kind, const StepParams<C>& p, W* w, const W* g, const Slots<C>& s,
                     int64_t n);

extern template void ApplyRowsKernel<float, float>(Kind, const StepParams<float>&, float*,
                                                   const float*, const Slots<float>&, int64_t);
extern template void ApplyRowsKernel<double, double>(Kind, const StepParams<double>&, double*,
                                                     const double*, const Slots<double>&,
                                                     int64_t);
extern template void ApplyRowsKernel<half_t, float>(Kind, const StepParams<float>&, half_t*,
                                                    const half_t*, const Slots<float>&, int64_t);

// The test optimizer on integer weights (uint8, int32, int64): exact two's-complement
// w += g (rescale_grad 1). Other dtypes are ignored.
void IntegerAdd(int dtype, void* weight, const void* grad, int64_t n);

}  // namespace optimizer
}  // namespace kvstore
