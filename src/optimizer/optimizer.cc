// optimizer.cc - the built-in optimizers (sgd, nag, adam, adagrad, rmsprop, test) as
// updaters, and the table that turns a spec string into one.
//
// The update rules are those of the reference implementation, Apache MXNet 1.9.1, as its
// Python optimizers run them from a kvstore updater: sgd through multi_sgd_update /
// multi_sgd_mom_update (the Python SGD aggregates), nag through nag_mom_update (sgd_update
// without momentum), adam through adam_update, rmsprop through rmsprop_update and
// rmspropalex_update (centered), adagrad and test as the Python classes' NDArray arithmetic.
// Each kernel below performs the reference's operations in the reference's order, so float32
// and float64 results are the same bit for bit (the build compiles this file with
// -ffp-contract=off: no a*b+c is fused into one rounding). docs/OPTIMIZERS.md writes each
// rule out. Where the reference's fused operators take their hyper-parameters as float32
// fields (sgd, nag, adam, rmsprop), they are rounded to float32 here too, also for float64
// weights; adagrad's NDArray scalars are doubles.
//
// Arithmetic runs in float for float16/float32 weights and in double for float64 weights;
// optimizer state is kept in that compute type (so float16 weights get float32 state), per
// key, created zeroed on the key's first update. Arrays that are not on the CPU are staged
// through host copies.
//
// State is transactional (UpdateTxn): each key keeps its committed state and a staging
// copy of the same size. Update() reads the committed state and writes the staging copy;
// the caller's commit swaps the two, its discard leaves the committed state as it was. So a
// push that fails on any key, or whose device copy back fails, moves no state.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/array.h"
#include "core/dtype.h"
#include "core/cpu/worker_pool.h"
#include "core/error.h"
#include "optimizer/optimizer.h"
#include "optimizer/spec.h"

namespace kvstore {
namespace optimizer {
namespace {

enum class Kind { kSgd, kNag, kAdam, kAdaGrad, kRmsProp, kTest };

// Every hyper-parameter of every optimizer; each optimizer's table says which it accepts
// and their defaults. Clipping is off by default (-1); see ClipGradientOn for the rules.
struct Hyper {
  double learning_rate = 0;
  double wd = 0;
  double rescale_grad = 1;
  double clip_gradient = -1;
  double momentum = 0;
  double beta1 = 0;
  double beta2 = 0;
  double epsilon = 0;
  double gamma1 = 0;
  double gamma2 = 0;
  double centered = 0;
  double clip_weights = -1;
};

struct ParamDef {
  const char* name;
  const char* alias;  // nullptr when there is none
  double Hyper::*field;
  double default_value;
  double lo, hi;  // the valid range; infinite bounds are not checked
  bool lo_open, hi_open;
  bool flag;  // only 0 and 1 are valid
};

struct OptimizerDef {
  const char* name;
  Kind kind;
  std::vector<ParamDef> params;
};

constexpr double kInf = HUGE_VAL;

ParamDef LearningRate(double default_value) {
  return {"learning_rate", "lr", &Hyper::learning_rate, default_value, 0, kInf, false, false,
          false};
}
const ParamDef kWd = {"wd", nullptr, &Hyper::wd, 0, -kInf, kInf, false, false, false};
const ParamDef kRescale = {"rescale_grad", nullptr, &Hyper::rescale_grad, 1, -kInf, kInf,
                           false, false, false};
// sgd, nag, adam and rmsprop: any value; <= 0 turns clipping off, as in the reference.
const ParamDef kClip = {"clip_gradient", nullptr, &Hyper::clip_gradient, -1, -kInf, kInf,
                        false, false, false};
// adagrad clips to [-c, c] whenever c is given, 0 included (the reference tests `is not
// None`); a negative c would make the reference map every gradient to c or -c, so it is
// refused. The default -1 stands for "not given".
const ParamDef kClipGiven = {"clip_gradient", nullptr, &Hyper::clip_gradient, -1, 0, kInf,
                             false, false, false};
const ParamDef kMomentum = {"momentum", nullptr, &Hyper::momentum, 0, 0, 1, false, false, false};
// Decay factors must stay below 1: adam divides by 1 - beta1^t.
ParamDef Decay(const char* name, const char* alias, double Hyper::*field, double default_value) {
  return {name, alias, field, default_value, 0, 1, false, true, false};
}
ParamDef Epsilon(const char* name, const char* alias, double default_value) {
  return {name, alias, &Hyper::epsilon, default_value, 0, kInf, true, false, false};
}

// Defaults are the reference's (MXNet 1.9.1 python/mxnet/optimizer/optimizer.py).
const std::vector<OptimizerDef>& Registry() {
  static const std::vector<OptimizerDef> registry = {
      {"sgd", Kind::kSgd, {LearningRate(0.01), kMomentum, kWd, kRescale, kClip}},
      {"nag", Kind::kNag, {LearningRate(0.01), kMomentum, kWd, kRescale, kClip}},
      {"adam",
       Kind::kAdam,
       {LearningRate(0.001), Decay("beta1", nullptr, &Hyper::beta1, 0.9),
        Decay("beta2", nullptr, &Hyper::beta2, 0.999), Epsilon("epsilon", nullptr, 1e-8), kWd,
        kRescale, kClip}},
      {"adagrad",
       Kind::kAdaGrad,
       {LearningRate(0.01), Epsilon("eps", "epsilon", 1e-7), kWd, kRescale, kClipGiven}},
      {"rmsprop",
       Kind::kRmsProp,
       {LearningRate(0.001), Decay("gamma1", "rho", &Hyper::gamma1, 0.9),
        Decay("gamma2", nullptr, &Hyper::gamma2, 0.9), Epsilon("epsilon", nullptr, 1e-8),
        {"centered", nullptr, &Hyper::centered, 0, 0, 1, false, false, true}, kWd, kRescale,
        kClip,
        {"clip_weights", nullptr, &Hyper::clip_weights, -1, -kInf, kInf, false, false, false}}},
      {"test", Kind::kTest, {kRescale}},
  };
  return registry;
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string ValidNames() {
  std::string out;
  for (const OptimizerDef& def : Registry()) {
    if (!out.empty()) out += ", ";
    out += def.name;
  }
  return out;
}

std::string ValidParams(const OptimizerDef& def) {
  std::string out;
  for (const ParamDef& p : def.params) {
    if (!out.empty()) out += ", ";
    out += p.name;
    if (p.alias) out += StrFormat(" (alias %s)", p.alias);
  }
  return out;
}

std::string RangeText(const ParamDef& p) {
  if (p.flag) return "0 or 1";
  bool has_lo = std::isfinite(p.lo), has_hi = std::isfinite(p.hi);
  if (has_lo && has_hi) {
    return StrFormat("in %c%g, %g%c", p.lo_open ? '(' : '[', p.lo, p.hi, p.hi_open ? ')' : ']');
  }
  if (has_lo) return StrFormat("%s %g", p.lo_open ? ">" : ">=", p.lo);
  return StrFormat("%s %g", p.hi_open ? "<" : "<=", p.hi);
}

bool InRange(const ParamDef& p, double v) {
  if (p.flag) return v == 0 || v == 1;
  if (std::isfinite(p.lo) && (p.lo_open ? v <= p.lo : v < p.lo)) return false;
  if (std::isfinite(p.hi) && (p.hi_open ? v >= p.hi : v > p.hi)) return false;
  return true;
}

// Whether the gradient is clipped. The reference's Python optimizers pass clip_gradient to
// the fused operators only when it is truthy and the operators clip only when it is >= 0,
// so for those <= 0 is off; adagrad clips whenever the value was given (kClipGiven).
bool ClipGradientOn(Kind kind, double c) { return kind == Kind::kAdaGrad ? c >= 0 : c > 0; }

// Whether the reference's fused operator for `kind` takes its hyper-parameters as float32.
bool FusedOperator(Kind kind) {
  return kind == Kind::kSgd || kind == Kind::kNag || kind == Kind::kAdam ||
         kind == Kind::kRmsProp;
}

double RoundToFloat32(double v) { return static_cast<double>(static_cast<float>(v)); }

// The hyper-parameters as the reference's kernels receive them, from the values of a spec:
// float32 for the fused operators; every clip bound a float32 field (adagrad's nd.clip
// too), and a clip that is off an infinite bound. adam's learning rate is left as given:
// its bias-corrected step size is rounded at each step (OptimizerUpdater::StepLr).
//
// Written as a loop over member pointers on purpose: GCC 12.2 at -O2 miscompiles a
// straight-line `p.lr = fused ? (double)(float)lr : lr; p.wd = ...` (its basic-block SLP
// vectoriser stores the unconverted pair), which the bit-exact tests would catch.
Hyper OperatorValues(const OptimizerDef& def, const Hyper& given) {
  Hyper op = given;
  op.clip_gradient = kInf;  // also for optimizers without these parameters
  op.clip_weights = kInf;
  const bool fused = FusedOperator(def.kind);
  for (const ParamDef& p : def.params) {
    double v = given.*p.field;
    if (p.field == &Hyper::clip_gradient) {
      v = ClipGradientOn(def.kind, v) ? RoundToFloat32(v) : kInf;
    } else if (p.field == &Hyper::clip_weights) {
      v = v > 0 ? RoundToFloat32(v) : kInf;  // Python passes it when truthy, kernels use >= 0
    } else if (fused && !(def.kind == Kind::kAdam && p.field == &Hyper::learning_rate)) {
      v = RoundToFloat32(v);
    }
    op.*p.field = v;
  }
  return op;
}

// ---------------------------------------------------------------------------------------
// Element kernels. W is the stored element type, C the compute type (float or double).

template <typename C, typename W> inline C LoadAs(W v) { return static_cast<C>(v); }
template <> inline float LoadAs<float, half_t>(half_t v) { return HalfToFloat(v.bits); }
template <typename W, typename C> inline W StoreAs(C v) { return static_cast<W>(v); }
template <> inline half_t StoreAs<half_t, float>(float v) { return half_t{FloatToHalf(v)}; }

// The reference's clip(v, bound): v > bound gives bound, v < -bound gives -bound, anything
// else (NaN included) passes. Written as min/max, which vectorises; with an infinite bound
// it returns v unchanged, which is how a disabled clip is expressed where the reference's
// two branches do the same arithmetic.
template <typename C> inline C Clip(C v, C bound) { return std::min(std::max(v, -bound), bound); }

template <typename W> struct ComputeType { using type = float; };
template <> struct ComputeType<double> { using type = double; };

constexpr int kMaxSlots = 3;

// The hyper-parameters of one step in the compute type.
template <typename C>
struct StepParams {
  C lr, wd, rescale, clip, momentum, beta1, beta2, eps, gamma1, gamma2, clip_w;
  bool clip_on;
};

// One update's state: the committed slots it reads and the staging slots it writes.
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

// Applies one update to n elements: reads w, g and the committed state, writes w and the
// staging state. Never throws. Each loop is branch-free, so compilers vectorise it when
// math errno is off.
template <typename W, typename C>
void ApplyKernel(Kind kind, const StepParams<C>& p, W* __restrict w, const W* __restrict g,
                 const Slots<C>& s, int64_t n) {
  switch (kind) {
    case Kind::kSgd:
      if (s.out[0] != nullptr) {
        if (p.clip_on) SgdKernel<true, true>(p, w, g, s.in[0], s.out[0], n);
        else SgdKernel<false, true>(p, w, g, s.in[0], s.out[0], n);
      } else {
        if (p.clip_on) SgdKernel<true, false, W, C>(p, w, g, nullptr, nullptr, n);
        else SgdKernel<false, false, W, C>(p, w, g, nullptr, nullptr, n);
      }
      break;
    case Kind::kNag:
      if (s.out[0] != nullptr) {
        if (p.clip_on) NagMomentumKernel<true>(p, w, g, s.in[0], s.out[0], n);
        else NagMomentumKernel<false>(p, w, g, s.in[0], s.out[0], n);
      } else {
        if (p.clip_on) SgdUpdateKernel<true>(p, w, g, n);
        else SgdUpdateKernel<false>(p, w, g, n);
      }
      break;
    case Kind::kAdam: {
      // adam_update: g' = clip(g*rescale + w*wd); m = beta1*m + (1-beta1)*g';
      // v = beta2*v + (1-beta2)*g'*g'; w = w - lr*m/(sqrt(v) + eps)
      const C* __restrict m_in = s.in[0];
      const C* __restrict v_in = s.in[1];
      C* __restrict m_out = s.out[0];
      C* __restrict v_out = s.out[1];
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
      break;
    }
    case Kind::kAdaGrad: {
      // Python AdaGrad: g' = clip(g*rescale); h = h + g'*g'; d = g'/sqrt(h + eps);
      // w = w + (d + w*wd)*(-lr)
      const C* __restrict h_in = s.in[0];
      C* __restrict h_out = s.out[0];
      const C neg_lr = -p.lr;
      for (int64_t i = 0; i < n; ++i) {
        const C wi = LoadAs<C>(w[i]);
        const C gr = Clip(LoadAs<C>(g[i]) * p.rescale, p.clip);
        const C h = h_in[i] + gr * gr;
        h_out[i] = h;
        w[i] = StoreAs<W>(wi + (gr / std::sqrt(h + p.eps) + wi * p.wd) * neg_lr);
      }
      break;
    }
    case Kind::kRmsProp:
      if (s.out[2] == nullptr) {
        // rmsprop_update: g' = clip(rescale*g + wd*w); n = (1-gamma1)*(g'*g') + gamma1*n;
        // w = clip(w - lr*(g'/sqrt(n + eps)), clip_weights)
        const C* __restrict n_in = s.in[0];
        C* __restrict n_out = s.out[0];
        const C one_g1 = C(1) - p.gamma1;
        for (int64_t i = 0; i < n; ++i) {
          const C wi = LoadAs<C>(w[i]);
          const C gr = Clip(p.rescale * LoadAs<C>(g[i]) + p.wd * wi, p.clip);
          const C nn = one_g1 * (gr * gr) + p.gamma1 * n_in[i];
          n_out[i] = nn;
          w[i] = StoreAs<W>(Clip(wi - p.lr * (gr / std::sqrt(nn + p.eps)), p.clip_w));
        }
      } else {
        // rmspropalex_update (centered): g' as above; n = (1-gamma1)*g'*g' + gamma1*n;
        // gm = (1-gamma1)*g' + gamma1*gm; delta = gamma2*delta - lr*g'/sqrt(n - gm*gm + eps);
        // w = clip(w + delta, clip_weights)
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
      break;
    case Kind::kTest:
      // w = w + g*rescale
      for (int64_t i = 0; i < n; ++i) {
        w[i] = StoreAs<W>(LoadAs<C>(w[i]) + LoadAs<C>(g[i]) * p.rescale);
      }
      break;
  }
}

// The test optimizer on integer weights: exact two's-complement w += g (rescale_grad 1).
template <typename T>
void IntegerAdd(void* weight, const void* grad, int64_t n) {
  T* w = static_cast<T*>(weight);
  const T* g = static_cast<const T*>(grad);
  using U = std::make_unsigned_t<T>;
  for (int64_t i = 0; i < n; ++i) {
    w[i] = static_cast<T>(static_cast<U>(static_cast<U>(w[i]) + static_cast<U>(g[i])));
  }
}

int NumSlots(Kind kind, const Hyper& h) {
  switch (kind) {
    case Kind::kSgd:
    case Kind::kNag: return h.momentum != 0 ? 1 : 0;
    case Kind::kAdam: return 2;
    case Kind::kAdaGrad: return 1;
    case Kind::kRmsProp: return h.centered != 0 ? 3 : 1;
    case Kind::kTest: return 0;
  }
  return 0;
}

// The state of one key: the committed slots and a staging copy of each (see the top of
// the file), and the number of committed updates (adam's t is steps + 1 for the next).
// Invariant: `staged` is true between an Update that staged this key and the end of its
// transaction; only that transaction commits or discards it.
struct KeyState final : UpdateTxn::Staged {
  std::mutex mu;  // the store serialises a key's updates until commit; this makes it certain
  int dtype = 0;
  int64_t size = 0;
  int64_t steps = 0;
  bool staged = false;
  std::vector<float> f[2][kMaxSlots];  // [0] committed, [1] staged
  std::vector<double> d[2][kMaxSlots];

  void Commit() noexcept override {
    std::lock_guard<std::mutex> lock(mu);
    if (!staged) return;
    for (int i = 0; i < kMaxSlots; ++i) {
      f[0][i].swap(f[1][i]);
      d[0][i].swap(d[1][i]);
    }
    steps += 1;
    staged = false;
  }
  void Discard() noexcept override {
    std::lock_guard<std::mutex> lock(mu);
    staged = false;
  }

  template <typename C> Slots<C> SlotsFor(int num_slots);
};
template <> Slots<float> KeyState::SlotsFor<float>(int num_slots) {
  Slots<float> s;
  for (int i = 0; i < num_slots; ++i) {
    s.in[i] = f[0][i].data();
    s.out[i] = f[1][i].data();
  }
  return s;
}
template <> Slots<double> KeyState::SlotsFor<double>(int num_slots) {
  Slots<double> s;
  for (int i = 0; i < num_slots; ++i) {
    s.in[i] = d[0][i].data();
    s.out[i] = d[1][i].data();
  }
  return s;
}

class OptimizerUpdater final : public Updater {
 public:
  OptimizerUpdater(const OptimizerDef& def, const Hyper& hyper)
      : def_(def), hyper_(hyper), op_(OperatorValues(def, hyper)),
        num_slots_(NumSlots(def.kind, hyper)) {}

  void Update(int key, const char* str_key, Array* recv, Array* stored,
              UpdateTxn* txn) override {
    try {
      UpdateImpl(key, str_key, recv, stored, txn);
    } catch (const std::bad_alloc&) {
      // Only reachable after the argument checks: stored is not null.
      KV_FAIL(KV_ERR_OUT_OF_MEMORY, "optimizer %s: out of memory for the state of key %s (%s)",
              def_.name, KeyName(key, str_key).c_str(), stored->Describe().c_str());
    }
  }

  void CheckDType(int dtype, const std::string& key) const override {
    if (!IsIntegerDType(dtype)) return;
    KV_CHECK(def_.kind == Kind::kTest && hyper_.rescale_grad == 1, KV_ERR_NOT_SUPPORTED,
             "optimizer %s cannot update key %s of integer dtype %s (only test with "
             "rescale_grad=1 can)", def_.name, key.c_str(), DTypeName(dtype));
  }

 private:
  void UpdateImpl(int key, const char* str_key, Array* recv, Array* stored, UpdateTxn* txn) {
    KV_CHECK(recv != nullptr && stored != nullptr && txn != nullptr, KV_ERR_NULL_POINTER,
             "optimizer %s: key %s: null argument", def_.name, KeyName(key, str_key).c_str());
    if (recv->shape() != stored->shape() || recv->dtype() != stored->dtype()) {
      CheckSameShapeDType(*stored, *recv,
                          StrFormat("gradient of key %s", KeyName(key, str_key).c_str()));
    }
    const int dtype = stored->dtype();
    CheckDType(dtype, KeyName(key, str_key));

    KeyState* state = GetState(key, str_key, *stored);
    std::lock_guard<std::mutex> lock(state->mu);
    KV_CHECK(!state->staged, KV_ERR_INTERNAL,
             "optimizer %s: key %s already has an update that was neither committed nor "
             "discarded", def_.name, KeyName(key, str_key).c_str());
    txn->Add(state);  // from here on the caller's txn ends what this call stages
    if (stored->ctx().is_cpu() && recv->ctx().is_cpu()) {
      Apply(state, recv->data(), stored->data());
      state->staged = true;
      return;
    }
    // Stage through host copies. The copy back may fail after the state was staged; the
    // caller then discards the txn, so the committed state is untouched.
    const Context host;
    std::unique_ptr<Array> host_w = Array::Create(stored->shape(), dtype, host);
    std::unique_ptr<Array> host_g = Array::Create(recv->shape(), dtype, host);
    CopyArray(host_w.get(), *stored);
    CopyArray(host_g.get(), *recv);
    Apply(state, host_g->data(), host_w->data());
    state->staged = true;
    CopyArray(stored, *host_w);
  }

  using StateKey = std::tuple<bool, int, std::string>;

  static std::string KeyName(int key, const char* str_key) {
    return str_key ? StrFormat("\"%s\"", str_key) : StrFormat("%d", key);
  }

  KeyState* GetState(int key, const char* str_key, const Array& stored) {
    StateKey sk = str_key ? StateKey(true, 0, str_key) : StateKey(false, key, std::string());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(sk);
    if (it == states_.end()) {
      // Built completely before it is published, so a failed allocation leaves no entry.
      auto fresh = std::make_unique<KeyState>();
      fresh->dtype = stored.dtype();
      fresh->size = stored.size();
      const size_t n = static_cast<size_t>(fresh->size);
      for (int copy = 0; copy < 2; ++copy) {
        for (int i = 0; i < num_slots_; ++i) {
          if (stored.dtype() == KV_FLOAT64) {
            fresh->d[copy][i].assign(n, 0.0);
          } else if (!IsIntegerDType(stored.dtype())) {
            fresh->f[copy][i].assign(n, 0.0f);
          }
        }
      }
      it = states_.emplace(std::move(sk), std::move(fresh)).first;
      return it->second.get();
    }
    KeyState* slot = it->second.get();
    KV_CHECK(slot->dtype == stored.dtype(), KV_ERR_DTYPE_MISMATCH,
             "optimizer %s: the state of key %s was created for dtype %s but the stored value "
             "is now %s", def_.name, KeyName(key, str_key).c_str(), DTypeName(slot->dtype),
             DTypeName(stored.dtype()));
    KV_CHECK(slot->size == stored.size(), KV_ERR_SHAPE_MISMATCH,
             "optimizer %s: the state of key %s has %lld elements but the stored value %s has "
             "%lld", def_.name, KeyName(key, str_key).c_str(), static_cast<long long>(slot->size),
             stored.Describe().c_str(), static_cast<long long>(stored.size()));
    return slot;
  }

  // The learning rate of the next step of `state` as the reference's kernel receives it.
  double StepLr(const KeyState& state) const {
    if (def_.kind != Kind::kAdam) return op_.learning_rate;
    // Bias correction in double, as the Python Adam computes it, then the operator's float32.
    const double t = static_cast<double>(state.steps + 1);
    return RoundToFloat32(hyper_.learning_rate * (std::sqrt(1.0 - std::pow(hyper_.beta2, t)) /
                                                  (1.0 - std::pow(hyper_.beta1, t))));
  }

  // The step's hyper-parameters in the compute type C (exact conversions of op_).
  template <typename C>
  StepParams<C> Params(double lr) const {
    StepParams<C> p;
    p.lr = static_cast<C>(lr);
    p.wd = static_cast<C>(op_.wd);
    p.rescale = static_cast<C>(op_.rescale_grad);
    p.clip = static_cast<C>(op_.clip_gradient);
    p.clip_on = std::isfinite(op_.clip_gradient);
    p.momentum = static_cast<C>(op_.momentum);
    p.beta1 = static_cast<C>(op_.beta1);
    p.beta2 = static_cast<C>(op_.beta2);
    p.eps = static_cast<C>(op_.epsilon);
    p.gamma1 = static_cast<C>(op_.gamma1);
    p.gamma2 = static_cast<C>(op_.gamma2);
    p.clip_w = static_cast<C>(op_.clip_weights);
    return p;
  }

  // Runs the kernel on host memory into the staging state. Never throws (every check
  // happened before).
  void Apply(KeyState* state, const void* grad, void* weight) {
    const int64_t n = state->size;
    switch (state->dtype) {
      case KV_FLOAT32: Run<float>(state, weight, grad, n); break;
      case KV_FLOAT64: Run<double>(state, weight, grad, n); break;
      case KV_FLOAT16: Run<half_t>(state, weight, grad, n); break;
      case KV_UINT8: IntegerAdd<uint8_t>(weight, grad, n); break;
      case KV_INT32: IntegerAdd<int32_t>(weight, grad, n); break;
      case KV_INT64: IntegerAdd<int64_t>(weight, grad, n); break;
      default: break;  // unreachable: CheckSameShapeDType accepted a known dtype
    }
  }

  // Large arrays are split over the shared CPU worker pool. Elements are independent, so
  // the result does not depend on the split.
  template <typename W>
  void Run(KeyState* state, void* weight, const void* grad, int64_t n) {
    using C = typename ComputeType<W>::type;
    const StepParams<C> p = Params<C>(StepLr(*state));
    W* w = static_cast<W*>(weight);
    const W* g = static_cast<const W*>(grad);
    const Slots<C> slots = state->SlotsFor<C>(num_slots_);
    WorkerPool& pool = WorkerPool::Instance();
    // weight read and written, gradient read, each state slot read and written
    const size_t traffic = static_cast<size_t>(n) * (3 * sizeof(W) + 2 * num_slots_ * sizeof(C));
    if (traffic < pool.parallel_min_bytes() || pool.width() == 1) {
      ApplyKernel<W, C>(def_.kind, p, w, g, slots, n);
      return;
    }
    const int parts = pool.width();
    pool.ParallelFor(parts, [&](int part) {
      int64_t begin, end;
      SplitRange(n, parts, part, 64, &begin, &end);
      if (begin >= end) return;
      ApplyKernel<W, C>(def_.kind, p, w + begin, g + begin, slots.Offset(begin), end - begin);
    });
  }

  const OptimizerDef& def_;
  const Hyper hyper_;  // as the spec gave them
  const Hyper op_;     // as the reference's kernels receive them (OperatorValues)
  const int num_slots_;
  std::mutex mu_;  // guards the map, not the states in it
  std::map<StateKey, std::unique_ptr<KeyState>> states_;
};

}  // namespace
}  // namespace optimizer

std::shared_ptr<Updater> CreateOptimizer(const std::string& spec_text) {
  using namespace optimizer;
  const Spec spec = ParseSpec(spec_text);
  const std::string name = Lower(spec.name);
  const OptimizerDef* def = nullptr;
  for (const OptimizerDef& d : Registry()) {
    if (name == d.name) def = &d;
  }
  KV_CHECK(def != nullptr, KV_ERR_INVALID_ARGUMENT,
           "unknown optimizer \"%s\" in spec \"%s\"; valid optimizers: %s",
           SpecExcerpt(spec.name).c_str(), SpecExcerpt(spec_text).c_str(), ValidNames().c_str());

  Hyper hyper;
  for (const ParamDef& p : def->params) hyper.*p.field = p.default_value;
  std::vector<const char*> given(def->params.size(), nullptr);
  for (const SpecParam& sp : spec.params) {
    size_t index = def->params.size();
    for (size_t i = 0; i < def->params.size(); ++i) {
      const ParamDef& p = def->params[i];
      if (sp.key == p.name || (p.alias && sp.key == p.alias)) index = i;
    }
    KV_CHECK(index < def->params.size(), KV_ERR_INVALID_ARGUMENT,
             "optimizer %s has no parameter \"%s\"; valid parameters: %s", def->name,
             SpecExcerpt(sp.key).c_str(), ValidParams(*def).c_str());
    const ParamDef& p = def->params[index];
    KV_CHECK(given[index] == nullptr, KV_ERR_INVALID_ARGUMENT,
             "parameter \"%s\" of optimizer %s is given twice (as \"%s\" and \"%s\")", p.name,
             def->name, given[index], sp.key.c_str());
    KV_CHECK(InRange(p, sp.value), KV_ERR_INVALID_ARGUMENT,
             "parameter \"%s\" of optimizer %s must be %s, got %g", p.name, def->name,
             RangeText(p).c_str(), sp.value);
    given[index] = sp.key.c_str();
    hyper.*p.field = sp.value;
  }
  return std::make_shared<OptimizerUpdater>(*def, hyper);
}

}  // namespace kvstore
