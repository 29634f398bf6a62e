// optimizer.h - built-in optimizers usable as updaters, created from a spec string such as
// "sgd(learning_rate=0.1,momentum=0.9,wd=1e-4,rescale_grad=0.5,clip_gradient=5)".
#pragma once

#include <memory>
#include <string>

#include "optimizer/updater.h"

namespace kvstore {

// Parses `spec` and returns an updater that keeps per-key optimizer state. Throws
// INVALID_ARGUMENT naming the unknown optimizer or parameter (and listing the valid ones).
std::shared_ptr<Updater> CreateOptimizer(const std::string& spec);

// Checks `spec` as CreateOptimizer does, without creating an optimizer or any state: throws
// exactly the error (code and message) CreateOptimizer would throw for it, or nothing when
// CreateOptimizer would succeed. A distributed worker checks a spec with it before
// shipping it to the servers.
void ValidateOptimizerSpec(const std::string& spec);

}  // namespace kvstore
