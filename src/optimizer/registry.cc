// registry.cc - the table of built-in optimizers and the checks that resolve a spec
// against it. Defaults and ranges are the reference's (MXNet 1.9.1), see registry.h.
#include "optimizer/registry.h"

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "optimizer/spec.h"

namespace kvstore {
namespace optimizer {
namespace {

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
// Every optimizer: float16 weights keep a float32 master copy in their state, updated with
// the float32 sum of the pushed gradients; the stored value is its float16 rounding
// (optimizer.cc). Other dtypes ignore it.
const ParamDef kMultiPrecision = {"multi_precision", nullptr, &Hyper::multi_precision, 0, 0, 1,
                                  false, false, true};
// sgd and adam (the reference's SGD and Adam take lazy_update=True by default): a sum of
// row_sparse pushes updates only its rows, and their state (optimizer.cc UpdateRows); 0
// applies it densely, as a gradient that is zero in every other row.
const ParamDef kLazyUpdate = {"lazy_update", nullptr, &Hyper::lazy_update, 1, 0, 1, false, false,
                              true};
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
      {"sgd",
       Kind::kSgd,
       {LearningRate(0.01), kMomentum, kWd, kRescale, kClip, kLazyUpdate, kMultiPrecision}},
      {"nag", Kind::kNag, {LearningRate(0.01), kMomentum, kWd, kRescale, kClip, kMultiPrecision}},
      {"adam",
       Kind::kAdam,
       {LearningRate(0.001), Decay("beta1", nullptr, &Hyper::beta1, 0.9),
        Decay("beta2", nullptr, &Hyper::beta2, 0.999), Epsilon("epsilon", nullptr, 1e-8),
        kWd, kRescale, kClip, kLazyUpdate, kMultiPrecision}},
      {"adagrad",
       Kind::kAdaGrad,
       {LearningRate(0.01), Epsilon("eps", "epsilon", 1e-7), kWd, kRescale, kClipGiven,
        kMultiPrecision}},
      {"rmsprop",
       Kind::kRmsProp,
       {LearningRate(0.001), Decay("gamma1", "rho", &Hyper::gamma1, 0.9),
        Decay("gamma2", nullptr, &Hyper::gamma2, 0.9), Epsilon("epsilon", nullptr, 1e-8),
        {"centered", nullptr, &Hyper::centered, 0, 0, 1, false, false, true}, kWd, kRescale,
        kClip,
        {"clip_weights", nullptr, &Hyper::clip_weights, -1, -kInf, kInf, false, false, false},
        kMultiPrecision}},
      {"test", Kind::kTest, {kRescale, kMultiPrecision}},
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

// The table entry named by `spec` (case-insensitive). Throws INVALID_ARGUMENT listing the
// valid names.
const OptimizerDef& FindOptimizer(const Spec& spec, const std::string& spec_text) {
  const std::string name = Lower(spec.name);
  const OptimizerDef* def = nullptr;
  for (const OptimizerDef& d : Registry()) {
    if (name == d.name) def = &d;
  }
  KV_CHECK(def != nullptr, KV_ERR_INVALID_ARGUMENT,
           "unknown optimizer \"%s\" in spec \"%s\"; valid optimizers: %s",
           SpecExcerpt(spec.name).c_str(), SpecExcerpt(spec_text).c_str(), ValidNames().c_str());
  return *def;
}

}  // namespace

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

bool LazyRows(const OptimizerDef& def, const Hyper& hyper) {
  return (def.kind == Kind::kSgd || def.kind == Kind::kAdam) && hyper.lazy_update != 0;
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

ResolvedSpec ResolveSpec(const std::string& spec_text) {
  const Spec spec = ParseSpec(spec_text);
  ResolvedSpec out;
  const OptimizerDef& def = FindOptimizer(spec, spec_text);
  out.def = &def;
  for (const ParamDef& p : def.params) out.hyper.*p.field = p.default_value;
  // given[i]: the spelling (name or alias) under which parameter i was given, if it was.
  std::vector<const char*> given(def.params.size(), nullptr);
  for (const SpecParam& sp : spec.params) {
    size_t index = def.params.size();
    for (size_t i = 0; i < def.params.size(); ++i) {
      const ParamDef& p = def.params[i];
      if (sp.key == p.name || (p.alias && sp.key == p.alias)) index = i;
    }
    KV_CHECK(index < def.params.size(), KV_ERR_INVALID_ARGUMENT,
             "optimizer %s has no parameter \"%s\"; valid parameters: %s", def.name,
             SpecExcerpt(sp.key).c_str(), ValidParams(def).c_str());
    const ParamDef& p = def.params[index];
    KV_CHECK(given[index] == nullptr, KV_ERR_INVALID_ARGUMENT,
             "parameter \"%s\" of optimizer %s is given twice (as \"%s\" and \"%s\")", p.name,
             def.name, given[index], sp.key.c_str());
    KV_CHECK(InRange(p, sp.value), KV_ERR_INVALID_ARGUMENT,
             "parameter \"%s\" of optimizer %s must be %s, got %g", p.name, def.name,
             RangeText(p).c_str(), sp.value);
    given[index] = sp.key.c_str();
    out.hyper.*p.field = sp.value;
  }
  return out;
}

}  // namespace optimizer
}  // namespace kvstore
