// states.h - the saved-state side of a built-in optimizer: what a store's
// save_optimizer_states / load_optimizer_states asks of its updater. The built-in
// optimizers implement it; a C callback updater does not (its state is the caller's), so a
// store finds it with dynamic_cast and answers NOT_SUPPORTED when it is missing.
#pragma once

#include <string>
#include <vector>

#include "optimizer/registry.h"
#include "optimizer/state_file.h"

namespace kvstore {
namespace optimizer {

class StateHolder {
 public:
  // "sgd", "adam", ...
  virtual const char* OptimizerName() const = 0;
  // The spec with every parameter spelled out (CanonicalSpec).
  virtual std::string Spec() const = 0;
  // The committed state of every key that has one (StateTable::Save). The caller keeps
  // updates out while it runs (it holds every key of the store).
  virtual std::vector<KeyRecord> SaveStates() = 0;
  // Checks `file` against this optimizer, then replaces every key's state with the file's
  // (StateTable::Restore). The caller has checked the keys and weights against its own and
  // keeps updates out. Throws INVALID_ARGUMENT naming both optimizers when `file` was saved
  // from another one; on any error no state changes. Consumes file->keys. With `apply`
  // false it only checks (and allocates) and changes nothing: the first phase of a load
  // that several servers must all accept.
  virtual void LoadStates(StatesFile* file, const std::string& path, bool apply) = 0;

 protected:
  ~StateHolder() = default;
};

// "name(param=value,...)" with every parameter of `def` in table order, values printed
// exactly (%.17g): two specs that resolve to the same hyper-parameters give the same text.
std::string CanonicalSpec(const OptimizerDef& def, const Hyper& hyper);

}  // namespace optimizer
}  // namespace kvstore
