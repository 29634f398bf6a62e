// placement.cc - key placement (placement.h).
#include "ps/placement.h"

#include "core/error.h"
#include "ps/security.h"

namespace kvstore {
namespace dist {

uint64_t StableHash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<PartPlan> PlanParts(bool str_key, int64_t int_key, const std::string& name,
                                int64_t total, int num_servers, int64_t bound, int64_t row_len) {
  std::vector<PartPlan> parts;
  if (total < bound || num_servers == 1 || row_len <= 0) {
    const uint64_t h = str_key ? StableHash(name) : static_cast<uint64_t>(int_key);
    parts.push_back({static_cast<int>(h % static_cast<uint64_t>(num_servers)), 0, total});
    return parts;
  }
  // 128-bit products: rows * i cannot overflow.
  const int64_t rows = total / row_len;
  for (int i = 0; i < num_servers; ++i) {
    const int64_t b = static_cast<int64_t>((static_cast<__int128>(rows) * i) / num_servers);
    const int64_t e = static_cast<int64_t>((static_cast<__int128>(rows) * (i + 1)) / num_servers);
    parts.push_back({i, b * row_len, (e - b) * row_len});
  }
  return parts;
}

int64_t PlacementRowLen(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

void CheckPartsFit(const std::vector<PartPlan>& parts, size_t esize, const std::string& key) {
  const int64_t bound = MaxMessageBytes();
  for (const PartPlan& p : parts) {
    const uint64_t bytes = static_cast<uint64_t>(p.count) * esize;
    KV_CHECK(bytes <= static_cast<uint64_t>(bound), KV_ERR_INVALID_ARGUMENT,
             "key %s: its part on server %d is %llu bytes, more than the %lld bytes a node "
             "accepts in one message (KVSTORE_MAX_MESSAGE_BYTES; set it on every node of the "
             "job, or add servers to split large keys further)",
             key.c_str(), p.server, static_cast<unsigned long long>(bytes),
             static_cast<long long>(bound));
  }
}

}  // namespace dist
}  // namespace kvstore
