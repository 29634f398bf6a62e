// kernels.cc - the element loops of sgd, nag, adam, adagrad, rmsprop and test (kernels.h).
//
// W is the stored element type, C the compute type (float or double). Each loop is
// branch-free (clipping that is off is either a separate instantiation or an infinite
// bound), so the compiler vectorises it when math errno is off; every rule is the
// reference's, in its order of operations, and is written out in docs/OPTIMIZERS.md.
#include "optimizer/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace kvstore {
namespace optimizer {
namespace {

template <typename C, typename W> inline C LoadAs(W v) { return static_cast<C>(v); }
template <> inline float LoadAs<float, half_t>(half_t v) { return HalfToFloat(v.bits); }
template <typename W, typename C> inline W StoreAs(C v) { return static_cast<W>(v); }
template <> inline half_t StoreAs<half_t, float>(float v) { return half_t{FloatToHalf(v)}; }

// The reference's clip(v, bound): v > bound gives bound, v < -bound gives -bound, anything
// else (NaN included) passes. Written as min/max, which vectorises; with an infinite bound
// it returns v unchanged, which is how a disabled clip is expressed where the reference's
// two branches do the same arithmetic.
template <typename C> inline C Clip(C v, C bound) { return std::min(std::max(v, -bound), bound); }

// sgd: the reference's multi_sgd_mom_update, or multi_sgd_update (momentum 0, no state):
//   mom = momentum*mom - (lr*wd)*w - lr*clip(rescale*g)     (clipping on)
//   mom = momentum*mom - (lr*wd)*w - (lr*rescale)*g         (clipping off)
//   w = w + mom
template <bool kClipOn, bool kMomentum, typename W, typename C>
void SgdKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
               const C* __restrict mom_in, C* __restrict mom_out, int64_t n) {
  const C lr_wd = p.lr * p.wd, lr_rescale = p.lr * p.rescale;
  const C momentum = kMomentum ? p.momentum : C(0);
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]), gi = LoadAs<C>(g[i]);
    const C step = kClipOn ? p.lr * Clip(p.rescale * gi, p.clip) : lr_rescale * gi;
    const C mom = momentum * (kMomentum ? mom_in[i] : C(0)) - lr_wd * wi - step;
    if (kMomentum) mom_out[i] = mom;
    w[i] = StoreAs<W>(wi + mom);
  }
}

// nag with momentum: the reference's nag_mom_update, with g' = clip(rescale*g) (or
// rescale*g when clipping is off):
//   mom = momentum*mom
//   w = (w - mom) + (momentum + 1)*(mom - lr*(g' + wd*w))
//   mom = mom - lr*(g' + wd*w)
template <bool kClipOn, typename W, typename C>
void NagMomentumKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                       const C* __restrict mom_in, C* __restrict mom_out, int64_t n) {
  const C momentum_1 = p.momentum + C(1);
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]), gi = LoadAs<C>(g[i]);
    const C gr = kClipOn ? Clip(p.rescale * gi, p.clip) : p.rescale * gi;
    const C mom = p.momentum * mom_in[i];
    const C step = p.lr * (gr + p.wd * wi);
    w[i] = StoreAs<W>((wi - mom) + momentum_1 * (mom - step));
    mom_out[i] = mom - step;
  }
}

// nag without momentum: the reference's sgd_update (not multi_sgd_update: another order)
//   w = (1 - lr*wd)*w - lr*clip(rescale*g)     (clipping on)
//   w = (1 - lr*wd)*w - (lr*rescale)*g         (clipping off)
template <bool kClipOn, typename W, typename C>
void SgdUpdateKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                     int64_t n) {
  const C decay = C(1) - p.lr * p.wd, lr_rescale = p.lr * p.rescale;
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]), gi = LoadAs<C>(g[i]);
    const C step = kClipOn ? p.lr * Clip(p.rescale * gi, p.clip) : lr_rescale * gi;
    w[i] = StoreAs<W>(decay * wi - step);
  }
}

// sgd and nag pick their loop by whether there is momentum state (slot 0) and whether
// clipping is on; each combination is its own instantiation, so the loops stay branch-free.
template <typename W, typename C>
void SgdFamily(Kind kind, const StepParams<C>& p, W* w, const W* g, const Slots<C>& s,
               int64_t n) {
  const bool momentum = s.out[0] != nullptr;
  if (kind == Kind::kSgd && momentum) {
    if (p.clip_on) SgdKernel<true, true>(p, w, g, s.in[0], s.out[0], n);
    else SgdKernel<false, true>(p, w, g, s.in[0], s.out[0], n);
  } else if (kind == Kind::kSgd) {
    if (p.clip_on) SgdKernel<true, false, W, C>(p, w, g, nullptr, nullptr, n);
    else SgdKernel<false, false, W, C>(p, w, g, nullptr, nullptr, n);
  } else if (momentum) {
    if (p.clip_on) NagMomentumKernel<true>(p, w, g, s.in[0], s.out[0], n);
    else NagMomentumKernel<false>(p, w, g, s.in[0], s.out[0], n);
  } else {
    if (p.clip_on) SgdUpdateKernel<true>(p, w, g, n);
    else SgdUpdateKernel<false>(p, w, g, n);
  }
}

// adam_update: g' = clip(g*rescale + w*wd); m = beta1*m + (1-beta1)*g';
// v = beta2*v + (1-beta2)*g'*g'; w = w - lr*m/(sqrt(v) + eps)
template <typename W, typename C>
void AdamKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                const C* __restrict m_in, const C* __restrict v_in, C* __restrict m_out,
                C* __restrict v_out, int64_t n) {
  const C one_b1 = C(1) - p.beta1, one_b2 = C(1) - p.beta2;
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]);
    const C gr = Clip(LoadAs<C>(g[i]) * p.rescale + wi * p.wd, p.clip);
    const C m = p.beta1 * m_in[i] + one_b1 * gr;
    const C v = p.beta2 * v_in[i] + one_b2 * gr * gr;
    m_out[i] = m;
    v_out[i] = v;
    w[i] = StoreAs<W>(wi - p.lr * m / (std::sqrt(v) + p.eps));
  }
}

// adam's lazy update (AdamDnsRspDnsKernel), on the pushed rows: as adam_update, except that
// with clipping on the variance adds (1-beta2)*(g'*g') (the kernel's square(clip(...)))
// rather than ((1-beta2)*g')*g'.
template <bool kClipOn, typename W, typename C>
void AdamRowsKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                    const C* __restrict m_in, const C* __restrict v_in, C* __restrict m_out,
                    C* __restrict v_out, int64_t n) {
  const C one_b1 = C(1) - p.beta1, one_b2 = C(1) - p.beta2;
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]);
    const C gr = LoadAs<C>(g[i]) * p.rescale + wi * p.wd;
    const C gc = kClipOn ? Clip(gr, p.clip) : gr;
    const C m = p.beta1 * m_in[i] + one_b1 * gc;
    const C v = kClipOn ? p.beta2 * v_in[i] + one_b2 * (gc * gc)
                        : p.beta2 * v_in[i] + one_b2 * gc * gc;
    m_out[i] = m;
    v_out[i] = v;
    w[i] = StoreAs<W>(wi - p.lr * m / (std::sqrt(v) + p.eps));
  }
}

// Python AdaGrad: g' = clip(g*rescale); h = h + g'*g'; d = g'/sqrt(h + eps);
// w = w + (d + w*wd)*(-lr)
template <typename W, typename C>
void AdaGradKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                   const C* __restrict h_in, C* __restrict h_out, int64_t n) {
  const C neg_lr = -p.lr;
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]);
    const C gr = Clip(LoadAs<C>(g[i]) * p.rescale, p.clip);
    const C h = h_in[i] + gr * gr;
    h_out[i] = h;
    w[i] = StoreAs<W>(wi + (gr / std::sqrt(h + p.eps) + wi * p.wd) * neg_lr);
  }
}

// rmsprop_update: g' = clip(rescale*g + wd*w); n = (1-gamma1)*(g'*g') + gamma1*n;
// w = clip(w - lr*(g'/sqrt(n + eps)), clip_weights)
template <typename W, typename C>
void RmsPropKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                   const C* __restrict n_in, C* __restrict n_out, int64_t n) {
  const C one_g1 = C(1) - p.gamma1;
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]);
    const C gr = Clip(p.rescale * LoadAs<C>(g[i]) + p.wd * wi, p.clip);
    const C nn = one_g1 * (gr * gr) + p.gamma1 * n_in[i];
    n_out[i] = nn;
    w[i] = StoreAs<W>(Clip(wi - p.lr * (gr / std::sqrt(nn + p.eps)), p.clip_w));
  }
}

// rmspropalex_update (centered): g' as above; n = (1-gamma1)*g'*g' + gamma1*n;
// gm = (1-gamma1)*g' + gamma1*gm; delta = gamma2*delta - lr*g'/sqrt(n - gm*gm + eps);
// w = clip(w + delta, clip_weights). Slots: 0 n, 1 gm, 2 delta.
template <typename W, typename C>
void RmsPropCenteredKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                           const Slots<C>& s, int64_t n) {
  const C* __restrict n_in = s.in[0];
  const C* __restrict gm_in = s.in[1];
  const C* __restrict d_in = s.in[2];
  C* __restrict n_out = s.out[0];
  C* __restrict gm_out = s.out[1];
  C* __restrict d_out = s.out[2];
  const C one_g1 = C(1) - p.gamma1;
  for (int64_t i = 0; i < n; ++i) {
    const C wi = LoadAs<C>(w[i]);
    const C gr = Clip(p.rescale * LoadAs<C>(g[i]) + p.wd * wi, p.clip);
    const C nn = one_g1 * gr * gr + p.gamma1 * n_in[i];
    const C gm = one_g1 * gr + p.gamma1 * gm_in[i];
    const C d = p.gamma2 * d_in[i] - p.lr * gr / std::sqrt(nn - gm * gm + p.eps);
    n_out[i] = nn;
    gm_out[i] = gm;
    d_out[i] = d;
    w[i] = StoreAs<W>(Clip(wi + d, p.clip_w));
  }
}

// test: w = w + g*rescale
template <typename W, typename C>
void TestKernel(const StepParams<C>& p, W* __restrict w, const W* __restrict g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    w[i] = StoreAs<W>(LoadAs<C>(w[i]) + LoadAs<C>(g[i]) * p.rescale);
  }
}

template <typename T>
void IntegerAddAs(void* weight, const void* grad, int64_t n) {
  T* w = static_cast<T*>(weight);
  const T* g = static_cast<const T*>(grad);
  using U = std::make_unsigned_t<T>;
  for (int64_t i = 0; i < n; ++i) {
    w[i] = static_cast<T>(static_cast<U>(static_cast<U>(w[i]) + static_cast<U>(g[i])));
  }
}

}  // namespace

template <typename W, typename C>
void ApplyKernel(Kind kind, const StepParams<C>& p, W* w, const W* g, const Slots<C>& s,
                 int64_t n) {
  switch (kind) {
    case Kind::kSgd:
    case Kind::kNag: SgdFamily<W, C>(kind, p, w, g, s, n); break;
    case Kind::kAdam: AdamKernel<W, C>(p, w, g, s.in[0], s.in[1], s.out[0], s.out[1], n); break;
    case Kind::kAdaGrad: AdaGradKernel<W, C>(p, w, g, s.in[0], s.out[0], n); break;
    case Kind::kRmsProp:
      if (s.out[2] == nullptr) RmsPropKernel<W, C>(p, w, g, s.in[0], s.out[0], n);
      else RmsPropCenteredKernel<W, C>(p, w, g, s, n);
      break;
    case Kind::kTest: TestKernel<W, C>(p, w, g, n); break;
  }
}

// The lazy updates of the pushed rows (kernels.h).
template <typename W, typename C>
void ApplyRowsKernel(Kind kind, const StepParams<C>& p, W* w, const W* g, const Slots<C>& s,
                     int64_t n) {
  if (kind == Kind::kAdam) {
    if (p.clip_on) AdamRowsKernel<true, W, C>(p, w, g, s.in[0], s.in[1], s.out[0], s.out[1], n);
    else AdamRowsKernel<false, W, C>(p, w, g, s.in[0], s.in[1], s.out[0], s.out[1], n);
  } else if (s.out[0] != nullptr) {  // sgd with momentum: SGDMomDnsRspDnsKernel
    if (p.clip_on) SgdKernel<true, true>(p, w, g, s.in[0], s.out[0], n);
    else SgdKernel<false, true>(p, w, g, s.in[0], s.out[0], n);
  } else {  // sgd without momentum: SGDDnsRspKernel, sgd_update's order
    if (p.clip_on) SgdUpdateKernel<true>(p, w, g, n);
    else SgdUpdateKernel<false>(p, w, g, n);
  }
}

template void ApplyRowsKernel<float, float>(Kind, const StepParams<float>&, float*,
                                            const float*, const Slots<float>&, int64_t);
template void ApplyRowsKernel<double, double>(Kind, const StepParams<double>&, double*,
                                              const double*, const Slots<double>&, int64_t);
template void ApplyRowsKernel<half_t, float>(Kind, const StepParams<float>&, half_t*,
                                             const half_t*, const Slots<float>&, int64_t);

template void ApplyKernel<float, float>(Kind, const StepParams<float>&, float*, const float*,
                                        const Slots<float>&, int64_t);
template void ApplyKernel<double, double>(Kind, const StepParams<double>&, double*,
                                          const double*, const Slots<double>&, int64_t);
template void ApplyKernel<half_t, float>(Kind, const StepParams<float>&, half_t*,
                                         const half_t*, const Slots<float>&, int64_t);

void IntegerAdd(int dtype, void* weight, const void* grad, int64_t n) {
  switch (dtype) {
    case KV_UINT8: IntegerAddAs<uint8_t>(weight, grad, n); break;
    case KV_INT32: IntegerAddAs<int32_t>(weight, grad, n); break;
    case KV_INT64: IntegerAddAs<int64_t>(weight, grad, n); break;
    default: break;
  }
}

}  // namespace optimizer
}  // namespace kvstore
