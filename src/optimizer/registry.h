// registry.h - the table of built-in optimizers: their names, parameters, defaults and
// valid ranges, and the step from a spec string to one optimizer's hyper-parameters.
//
// Two sets of values exist for each optimizer. `Hyper` as the spec gave them (defaults
// filled in) is what the factory validates and what adam's bias correction reads;
// OperatorValues() turns it into the values the reference's kernels receive (float32
// rounding for the fused operators, infinite bounds for clipping that is off), which is what
// the kernels (kernels.h) compute with. docs/OPTIMIZERS.md lists every parameter.
#pragma once

#include <string>
#include <vector>

namespace kvstore {
namespace optimizer {

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
  double multi_precision = 0;  // a flag: float16 weights keep a float32 master copy
  double lazy_update = 0;      // a flag (sgd, adam): row_sparse pushes update their rows only
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

// A spec resolved against the table: which optimizer, and its hyper-parameters as given
// (defaults for those not given). `def` points into the static table.
struct ResolvedSpec {
  const OptimizerDef* def = nullptr;
  Hyper hyper;
};

// Parses `spec_text` and checks it against the table. Throws INVALID_ARGUMENT for a syntax
// error (ParseSpec), an unknown optimizer (listing the valid ones), an unknown or repeated
// parameter (listing the optimizer's parameters) or a value outside its range. Allocates
// nothing beyond the parse.
ResolvedSpec ResolveSpec(const std::string& spec_text);

// The hyper-parameters as the reference's kernels receive them (see the top of the file).
Hyper OperatorValues(const OptimizerDef& def, const Hyper& given);

// Whether the optimizer applies row_sparse pushes lazily (Updater::UpdateRows: only the
// pushed rows and their state change): sgd and adam with lazy_update=1.
bool LazyRows(const OptimizerDef& def, const Hyper& hyper);

// The number of state slots (arrays the size of the weight) that `kind` keeps per key.
int NumSlots(Kind kind, const Hyper& hyper);

double RoundToFloat32(double v);

}  // namespace optimizer
}  // namespace kvstore
