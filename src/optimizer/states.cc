// states.cc - the canonical spec text a states file records.
#include "optimizer/states.h"

#include "core/error.h"

namespace kvstore {
namespace optimizer {

std::string CanonicalSpec(const OptimizerDef& def, const Hyper& hyper) {
  std::string out = def.name;
  out += '(';
  for (size_t i = 0; i < def.params.size(); ++i) {
    const ParamDef& p = def.params[i];
    if (i > 0) out += ',';
    out += StrFormat("%s=%.17g", p.name, hyper.*(p.field));
  }
  out += ')';
  return out;
}

}  // namespace optimizer
}  // namespace kvstore
