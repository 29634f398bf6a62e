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
// server (int keys: key mod S; string keys: StableHash mod S); larger keys are cut by rows
// into S parts: a value of R = n / row_len rows of `row_len` elements (row_len: the product
// of the shape's dimensions after the first, 1 for rank 0 and 1) has rows
// [floor(R*i/S), floor(R*(i+1)/S)) on server i, so that every part holds whole rows and the
// dense and the row_sparse operations of a key (ps/row_sparse_worker.h) address the same
// parts. With row_len 1 that is elements [floor(n*i/S), floor(n*(i+1)/S)); a key with
// fewer rows than servers leaves some servers an empty part (the reference's row rule).
struct PartPlan {
  int server;
  int64_t offset;
  int64_t count;
};
std::vector<PartPlan> PlanParts(bool str_key, int64_t int_key, const std::string& str_key_name,
                                int64_t total, int num_servers, int64_t bound,
                                int64_t row_len = 1);

// Elements per row of a value of `shape` (the product of shape[1:]; 1 for rank 0 and 1):
// the unit PlanParts cuts in.
int64_t PlacementRowLen(const std::vector<int64_t>& shape);

// Throws INVALID_ARGUMENT naming `key` when one of its parts (elements of `esize` bytes)
// exceeds MaxMessageBytes(): its server would refuse the message that carries it.
void CheckPartsFit(const std::vector<PartPlan>& parts, size_t esize, const std::string& key);

}  // namespace dist
}  // namespace kvstore
