// profile.cc - KVProfileStart, KVProfileStop, KVProfileGetStats (core/profile.h), and the
// spans and counters of the data calls (profile_call.h).
#include <cstring>
#include <string>

#include "c_api/guard.h"
#include "c_api/profile_call.h"
#include "kvstore/kvstore.h"

namespace kvstore {
namespace capi {

namespace {
int64_t CountKeys(profile::Stat stat, const KeyList& keys, const CallArrays& arrays, bool count) {
  int64_t total = 0;
  for (int i = 0; i < keys.size && static_cast<size_t>(i) < arrays.arrays.size(); ++i) {
    const auto bytes = static_cast<int64_t>(arrays.arrays[static_cast<size_t>(i)]->nbytes());
    total += bytes;
    if (count) profile::Count(stat, keys.Name(i), bytes, 0);
  }
  return total;
}
}  // namespace

void ProfiledCall::Finish() {
  const int64_t end = profile::NowNs();
  const bool ok = std::uncaught_exceptions() == exceptions_;
  int64_t bytes = CountKeys(stat_, *keys_, *arrays_, ok);
  if (outs_ != nullptr) bytes += CountKeys(profile::Stat::kPull, *out_keys_, *outs_, ok);
  profile::Record('X', name_, ok ? nullptr : "(failed)", start_, end, std::string(), bytes);
}

}  // namespace capi
}  // namespace kvstore

using kvstore::capi::Guard;

extern "C" {

int KVProfileStart(const char* path) {
  return Guard([&] { kvstore::profile::Start(path != nullptr ? path : ""); });
}

int KVProfileStop(void) {
  return Guard([&] { kvstore::profile::Stop(); });
}

int KVProfileGetStats(char* buf, size_t size, size_t* out_size) {
  return Guard([&] {
    KV_REQUIRE(out_size, "out_size");
    const std::string json = kvstore::profile::StatsJson();
    *out_size = json.size() + 1;
    KV_CHECK(buf != nullptr || size == 0, KV_ERR_NULL_POINTER, "buf is NULL with size %zu", size);
    KV_CHECK(size >= json.size() + 1, KV_ERR_INVALID_ARGUMENT,
             "the stats need %zu bytes, the buffer holds %zu", json.size() + 1, size);
    std::memcpy(buf, json.c_str(), json.size() + 1);
  });
}

}  // extern "C"
