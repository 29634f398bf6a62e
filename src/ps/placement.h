// placement.h - which server holds which elements of a key.
//
// Invariants. The plan depends only on the key, its size, the number of servers and the
// big-array bound, never on the host or the run, so every worker of a job computes the same
// plan; the parts of a key are disjoint and cover [0, total).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvstore {
namespace dist {

// Stable 64-bit FNV-1a of a string key: the same on every host and every run.
uint64_t StableHash(const std::string& s);

// Where the parts of a key live. Keys with fewer than `bound` elements go whole to one
// server (int keys: key mod S; string keys: StableHash mod S); larger keys are cut into S
// parts, part i = [floor(n*i/S), floor(n*(i+1)/S)) on server i.
struct PartPlan {
  int server;
  int64_t offset;
  int64_t count;
};
std::vector<PartPlan> PlanParts(bool str_key, int64_t int_key, const std::string& str_key_name,
                                int64_t total, int num_servers, int64_t bound);

// Throws INVALID_ARGUMENT naming `key` when one of its parts (elements of `esize` bytes)
// exceeds MaxMessageBytes(): its server would refuse the message that carries it.
void CheckPartsFit(const std::vector<PartPlan>& parts, size_t esize, const std::string& key);

}  // namespace dist
}  // namespace kvstore
