// optimizer.cc - the built-in optimizers (sgd, nag, adam, adagrad, rmsprop, test) as
// updaters, and the table that turns a spec string into one.
//
// The update rules are those of the reference implementation (Apache MXNet 1.9.1: the fused
// operators sgd_update, sgd_mom_update, nag_mom_update, adam_update, rmsprop_update and the
// Python AdaGrad and Test classes); docs/OPTIMIZERS.md writes each one out. Arithmetic runs
// in float for float16/float32 weights and in double for float64 weights; optimizer state is
// kept in that compute type (so float16 weights get float32 state), per key, created zeroed
// on the key's first update. Arrays that are not on the CPU are staged through host copies.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
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
#include "comm/cpu/worker_pool.h"
#include "core/error.h"
#include "optimizer/optimizer.h"
#include "optimizer/spec.h"

namespace kvstore {
namespace optimizer {
namespace {

enum class Kind { kSgd, kNag, kAdam, kAdaGrad, kRmsProp, kTest };

// Every hyper-parameter of every optimizer; each optimizer's table says which it accepts
// and their defaults. A negative clip disables clipping.
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
  double clip_weights = -1;
};

struct ParamDef {
  const char* name;
  const char* alias;  // nullptr when there is none
  double Hyper::*field;
  double default_value;
  double lo, hi;  // the valid range; infinite bounds are not checked
  bool lo_open, hi_open;
};

struct OptimizerDef {
  const char* name;
  Kind kind;
  std::vector<ParamDef> params;
};

constexpr double kInf = HUGE_VAL;

ParamDef LearningRate(double default_value) {
  return {"learning_rate", "lr", &Hyper::learning_rate, default_value, 0, kInf, false, false};
}
const ParamDef kWd = {"wd", nullptr, &Hyper::wd, 0, -kInf, kInf, false, false};
const ParamDef kRescale = {"rescale_grad", nullptr, &Hyper::rescale_grad, 1, -kInf, kInf,
                           false, false};
const ParamDef kClip = {"clip_gradient", nullptr, &Hyper::clip_gradient, -1, -kInf, kInf,
                        false, false};
const ParamDef kMomentum = {"momentum", nullptr, &Hyper::momentum, 0, 0, 1, false, false};
// Decay factors must stay below 1: adam divides by 1 - beta1^t.
ParamDef Decay(const char* name, const char* alias, double Hyper::*field, double default_value) {
  return {name, alias, field, default_value, 0, 1, false, true};
}
ParamDef Epsilon(const char* name, const char* alias, double default_value) {
  return {name, alias, &Hyper::epsilon, default_value, 0, kInf, true, false};
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
       {LearningRate(0.01), Epsilon("eps", "epsilon", 1e-7), kWd, kRescale, kClip}},
      {"rmsprop",
       Kind::kRmsProp,
       {LearningRate(0.001), Decay("gamma1", "rho", &Hyper::gamma1, 0.9),
        Epsilon("epsilon", nullptr, 1e-8), kWd, kRescale, kClip,
        {"clip_weights", nullptr, &Hyper::clip_weights, -1, -kInf, kInf, false, false}}},
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
  bool has_lo = std::isfinite(p.lo), has_hi = std::isfinite(p.hi);
  if (has_lo && has_hi) {
    return StrFormat("in %c%g, %g%c", p.lo_open ? '(' : '[', p.lo, p.hi, p.hi_open ? ')' : ']');
  }
  if (has_lo) return StrFormat("%s %g", p.lo_open ? ">" : ">=", p.lo);
  return StrFormat("%s %g", p.hi_open ? "<" : "<=", p.hi);
}

bool InRange(const ParamDef& p, double v) {
  if (std::isfinite(p.lo) && (p.lo_open ? v <= p.lo : v < p.lo)) return false;
  if (std::isfinite(p.hi) && (p.hi_open ? v >= p.hi : v > p.hi)) return false;
  return true;
}

// ---------------------------------------------------------------------------------------
// Element kernels. W is the stored element type, C the compute type (float or double).

template <typename C, typename W> inline C Load(W v) { return static_cast<C>(v); }
template <> inline float Load<float, half_t>(half_t v) { return HalfToFloat(v.bits); }
template <typename W, typename C> inline W StoreAs(C v) { return static_cast<W>(v); }
template <> inline half_t StoreAs<half_t, float>(float v) { return half_t{FloatToHalf(v)}; }

// clamp(v, -bound, bound) without a branch (min/max instructions); NaN stays NaN. A disabled
// clip uses an infinite bound.
template <typename C> inline C Clip(C v, C bound) { return std::min(std::max(v, -bound), bound); }
template <typename C> inline C ClipBound(double c) {
  return c >= 0 ? static_cast<C>(c) : std::numeric_limits<C>::infinity();
}

template <typename W> struct ComputeType { using type = float; };
template <> struct ComputeType<double> { using type = double; };

// The per-key state: up to two slots of `size` elements of the compute type, and the number
// of updates applied (adam's t).
struct KeyState {
  std::mutex mu;  // updates of one key are serialised by the store; this makes it certain
  int dtype = 0;
  int64_t size = 0;
  int64_t steps = 0;
  std::vector<float> f[2];
  std::vector<double> d[2];

  template <typename C> C* Slot(int i);
};
template <> float* KeyState::Slot<float>(int i) { return f[i].data(); }
template <> double* KeyState::Slot<double>(int i) { return d[i].data(); }

int NumSlots(Kind kind, const Hyper& h) {
  switch (kind) {
    case Kind::kSgd:
    case Kind::kNag: return h.momentum != 0 ? 1 : 0;
    case Kind::kAdam: return 2;
    case Kind::kAdaGrad:
    case Kind::kRmsProp: return 1;
    case Kind::kTest: return 0;
  }
  return 0;
}

// Applies one update to n elements. `lr_step` is the step's learning rate (bias-corrected
// for adam). Never throws. Each rule is one loop without branches (clipping is min/max with
// an infinite bound when off), which compilers vectorise when math errno is off.
template <typename W, typename C>
void ApplyKernel(Kind kind, const Hyper& hyper, double lr_step, W* __restrict w,
                 const W* __restrict g, C* __restrict s0, C* __restrict s1, int64_t n) {
  const C lr = static_cast<C>(lr_step);
  const C wd = static_cast<C>(hyper.wd);
  const C rescale = static_cast<C>(hyper.rescale_grad);
  const C clip = ClipBound<C>(hyper.clip_gradient);
  const C momentum = static_cast<C>(hyper.momentum);
  const C eps = static_cast<C>(hyper.epsilon);
  switch (kind) {
    case Kind::kSgd:
    case Kind::kNag:
      // g' = clip(rescale * g) + wd * w
      if (s0 == nullptr) {  // momentum 0: plain SGD for both
        for (int64_t i = 0; i < n; ++i) {
          C wi = Load<C>(w[i]);
          C gi = Clip(rescale * Load<C>(g[i]), clip) + wd * wi;
          w[i] = StoreAs<W>(wi - lr * gi);
        }
      } else if (kind == Kind::kSgd) {
        for (int64_t i = 0; i < n; ++i) {  // mom = momentum * mom - lr * g'; w += mom
          C wi = Load<C>(w[i]);
          C gi = Clip(rescale * Load<C>(g[i]), clip) + wd * wi;
          s0[i] = momentum * s0[i] - lr * gi;
          w[i] = StoreAs<W>(wi + s0[i]);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {  // mom = momentum * mom + g'; w -= lr (g' + momentum mom)
          C wi = Load<C>(w[i]);
          C gi = Clip(rescale * Load<C>(g[i]), clip) + wd * wi;
          s0[i] = momentum * s0[i] + gi;
          w[i] = StoreAs<W>(wi - lr * (gi + momentum * s0[i]));
        }
      }
      break;
    case Kind::kAdam: {
      // g' = clip(rescale * g + wd * w); m, v moving averages; w -= lr_t * m / (sqrt v + eps)
      const C b1 = static_cast<C>(hyper.beta1), b2 = static_cast<C>(hyper.beta2);
      for (int64_t i = 0; i < n; ++i) {
        C wi = Load<C>(w[i]);
        C gi = Clip(rescale * Load<C>(g[i]) + wd * wi, clip);
        s0[i] = b1 * s0[i] + (C(1) - b1) * gi;
        s1[i] = b2 * s1[i] + (C(1) - b2) * gi * gi;
        w[i] = StoreAs<W>(wi - lr * s0[i] / (std::sqrt(s1[i]) + eps));
      }
      break;
    }
    case Kind::kAdaGrad:
      // g' = clip(rescale * g); h += g'^2; w -= lr * (g' / sqrt(h + eps) + wd * w)
      for (int64_t i = 0; i < n; ++i) {
        C wi = Load<C>(w[i]);
        C gi = Clip(rescale * Load<C>(g[i]), clip);
        s0[i] += gi * gi;
        w[i] = StoreAs<W>(wi - lr * (gi / std::sqrt(s0[i] + eps) + wd * wi));
      }
      break;
    case Kind::kRmsProp: {
      // g' = clip(rescale * g + wd * w); n = (1 - gamma1) g'^2 + gamma1 n;
      // w -= lr * g' / sqrt(n + eps); then w = clip(w, clip_weights)
      const C gamma1 = static_cast<C>(hyper.gamma1);
      const C clip_w = ClipBound<C>(hyper.clip_weights);
      for (int64_t i = 0; i < n; ++i) {
        C wi = Load<C>(w[i]);
        C gi = Clip(rescale * Load<C>(g[i]) + wd * wi, clip);
        s0[i] = (C(1) - gamma1) * gi * gi + gamma1 * s0[i];
        w[i] = StoreAs<W>(Clip(wi - lr * gi / std::sqrt(s0[i] + eps), clip_w));
      }
      break;
    }
    case Kind::kTest:
      for (int64_t i = 0; i < n; ++i) w[i] = StoreAs<W>(Load<C>(w[i]) + rescale * Load<C>(g[i]));
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

class OptimizerUpdater final : public Updater {
 public:
  OptimizerUpdater(const OptimizerDef& def, const Hyper& hyper)
      : def_(def), hyper_(hyper), num_slots_(NumSlots(def.kind, hyper)) {}

  void Update(int key, const char* str_key, Array* recv, Array* stored) override {
    try {
      UpdateImpl(key, str_key, recv, stored);
    } catch (const std::bad_alloc&) {
      // Only reachable after the argument checks: stored is not null.
      KV_FAIL(KV_ERR_OUT_OF_MEMORY, "optimizer %s: out of memory for the state of key %s (%s)",
              def_.name, KeyName(key, str_key).c_str(), stored->Describe().c_str());
    }
  }

 private:
  void UpdateImpl(int key, const char* str_key, Array* recv, Array* stored) {
    KV_CHECK(recv != nullptr && stored != nullptr, KV_ERR_NULL_POINTER,
             "optimizer %s: key %s: null array", def_.name, KeyName(key, str_key).c_str());
    if (recv->shape() != stored->shape() || recv->dtype() != stored->dtype()) {
      CheckSameShapeDType(*stored, *recv,
                          StrFormat("gradient of key %s", KeyName(key, str_key).c_str()));
    }
    const int dtype = stored->dtype();
    if (IsIntegerDType(dtype)) {
      KV_CHECK(def_.kind == Kind::kTest && hyper_.rescale_grad == 1, KV_ERR_NOT_SUPPORTED,
               "optimizer %s cannot update key %s of integer dtype %s (only test with "
               "rescale_grad=1 can)", def_.name, KeyName(key, str_key).c_str(),
               DTypeName(dtype));
    }

    KeyState* state = GetState(key, str_key, *stored);
    std::lock_guard<std::mutex> lock(state->mu);
    if (stored->ctx().is_cpu() && recv->ctx().is_cpu()) {
      Apply(state, recv->data(), stored->data());
      return;
    }
    // Stage through host copies. Only the copy back can fail after the state has moved on,
    // so the state is restored from a snapshot in that case.
    const Context host;
    std::unique_ptr<Array> host_w = Array::Create(stored->shape(), dtype, host);
    std::unique_ptr<Array> host_g = Array::Create(recv->shape(), dtype, host);
    CopyArray(host_w.get(), *stored);
    CopyArray(host_g.get(), *recv);
    const int64_t steps = state->steps;
    std::vector<float> f[2] = {state->f[0], state->f[1]};
    std::vector<double> d[2] = {state->d[0], state->d[1]};
    Apply(state, host_g->data(), host_w->data());
    try {
      CopyArray(stored, *host_w);
    } catch (...) {
      state->steps = steps;
      for (int i = 0; i < 2; ++i) {
        state->f[i].swap(f[i]);
        state->d[i].swap(d[i]);
      }
      throw;
    }
  }

  using StateKey = std::tuple<bool, int, std::string>;

  static std::string KeyName(int key, const char* str_key) {
    return str_key ? StrFormat("\"%s\"", str_key) : StrFormat("%d", key);
  }

  KeyState* GetState(int key, const char* str_key, const Array& stored) {
    StateKey sk = str_key ? StateKey(true, 0, str_key) : StateKey(false, key, std::string());
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<KeyState>& slot = states_[sk];
    if (!slot) {
      auto fresh = std::make_unique<KeyState>();
      fresh->dtype = stored.dtype();
      fresh->size = stored.size();
      const size_t n = static_cast<size_t>(fresh->size);
      for (int i = 0; i < num_slots_; ++i) {
        if (stored.dtype() == KV_FLOAT64) {
          fresh->d[i].assign(n, 0.0);
        } else if (!IsIntegerDType(stored.dtype())) {
          fresh->f[i].assign(n, 0.0f);
        }
      }
      slot = std::move(fresh);
      return slot.get();
    }
    KV_CHECK(slot->dtype == stored.dtype(), KV_ERR_DTYPE_MISMATCH,
             "optimizer %s: the state of key %s was created for dtype %s but the stored value "
             "is now %s", def_.name, KeyName(key, str_key).c_str(), DTypeName(slot->dtype),
             DTypeName(stored.dtype()));
    KV_CHECK(slot->size == stored.size(), KV_ERR_SHAPE_MISMATCH,
             "optimizer %s: the state of key %s has %lld elements but the stored value %s has "
             "%lld", def_.name, KeyName(key, str_key).c_str(), static_cast<long long>(slot->size),
             stored.Describe().c_str(), static_cast<long long>(stored.size()));
    return slot.get();
  }

  // Runs the kernel on host memory. Never throws (every check happened before).
  void Apply(KeyState* state, const void* grad, void* weight) {
    state->steps += 1;
    double lr = hyper_.learning_rate;
    if (def_.kind == Kind::kAdam) {
      const double t = static_cast<double>(state->steps);
      lr *= std::sqrt(1.0 - std::pow(hyper_.beta2, t)) / (1.0 - std::pow(hyper_.beta1, t));
    }
    const int64_t n = state->size;
    switch (state->dtype) {
      case KV_FLOAT32: Run<float>(state, lr, weight, grad, n); break;
      case KV_FLOAT64: Run<double>(state, lr, weight, grad, n); break;
      case KV_FLOAT16: Run<half_t>(state, lr, weight, grad, n); break;
      case KV_UINT8: IntegerAdd<uint8_t>(weight, grad, n); break;
      case KV_INT32: IntegerAdd<int32_t>(weight, grad, n); break;
      case KV_INT64: IntegerAdd<int64_t>(weight, grad, n); break;
      default: break;  // unreachable: CheckSameShapeDType accepted a known dtype
    }
  }

  // Large arrays are split over the shared CPU worker pool. Elements are independent, so
  // the result does not depend on the split.
  template <typename W>
  void Run(KeyState* state, double lr, void* weight, const void* grad, int64_t n) {
    using C = typename ComputeType<W>::type;
    W* w = static_cast<W*>(weight);
    const W* g = static_cast<const W*>(grad);
    C* s0 = num_slots_ > 0 ? state->Slot<C>(0) : nullptr;
    C* s1 = num_slots_ > 1 ? state->Slot<C>(1) : nullptr;
    WorkerPool& pool = WorkerPool::Instance();
    // weight read and written, gradient read, each state slot read and written
    const size_t traffic = static_cast<size_t>(n) * (3 * sizeof(W) + 2 * num_slots_ * sizeof(C));
    if (traffic < pool.parallel_min_bytes() || pool.width() == 1) {
      ApplyKernel<W, C>(def_.kind, hyper_, lr, w, g, s0, s1, n);
      return;
    }
    const int parts = pool.width();
    pool.ParallelFor(parts, [&](int part) {
      int64_t begin, end;
      SplitRange(n, parts, part, 64, &begin, &end);
      if (begin >= end) return;
      ApplyKernel<W, C>(def_.kind, hyper_, lr, w + begin, g + begin, s0 ? s0 + begin : nullptr,
                        s1 ? s1 + begin : nullptr, end - begin);
    });
  }

  const OptimizerDef& def_;
  const Hyper hyper_;
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
           "unknown optimizer \"%s\" in spec \"%s\"; valid optimizers: %s", spec.name.c_str(),
           spec_text.c_str(), ValidNames().c_str());

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
             sp.key.c_str(), ValidParams(*def).c_str());
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
