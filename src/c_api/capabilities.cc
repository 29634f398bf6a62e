// capabilities.cc - KVStoreIsCapable: what a store can do, by name (the reference's
// KVStoreBase.is_capable). One table row per capability; a row whose answer depends on the
// store's type or role asks the store.
#include <cctype>
#include <string>

#include "c_api/guard.h"
#include "store/store.h"
#include "kvstore/kvstore.h"

using kvstore::Store;
using kvstore::capi::EnterStore;
using kvstore::capi::Guard;
using kvstore::capi::InCall;

namespace {
// The capability names, lowercase, and each one's answer.
struct CapabilityQuery {
  const char* name;
  bool (*has)(Store& store);
};
constexpr CapabilityQuery kCapabilities[] = {
    // Store::SetOptimizer: every store runs built-in optimizers (a worker's on its servers).
    {KV_CAPABILITY_OPTIMIZER, [](Store&) { return true; }},
};
}  // namespace

extern "C" int KVStoreIsCapable(KVStoreHandle store, const char* capability, int* out_capable) {
  return Guard([&] {
    const InCall in_call = EnterStore(store);
    KV_REQUIRE(capability, "capability");
    KV_REQUIRE(out_capable, "out_capable");
    std::string name(capability), known;  // names compare as store type names do
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const CapabilityQuery& c : kCapabilities) {
      if (name == c.name) {
        *out_capable = c.has(*store) ? 1 : 0;
        return;
      }
      known += std::string(known.empty() ? "\"" : ", \"") + c.name + "\"";
    }
    KV_FAIL(KV_ERR_INVALID_ARGUMENT, "unknown capability \"%.200s\"; known capabilities: %s",
            capability, known.c_str());
  });
}
