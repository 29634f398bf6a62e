// key.h - the identity of a key of a distributed store, in the one encoding every node
// uses: how it travels (the header's key, or the string frame with kFlagStrKey), how
// messages name it (Display) and where its parts live (Parts). Nodes file keys in a
// KeyTable (key_table.h), which needs no encoding of its own.
//
// Invariants. An int key and a string key are different keys whatever their bytes (a
// KeyTable indexes the two kinds apart). A string key travels by its text
// (never empty on the wire) and is placed by StableHash of it, so every node computes the
// same placement. Plain value type; no shared state, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ps/placement.h"
#include "ps/wire.h"
#include "store/store.h"

namespace kvstore {
namespace dist {

struct KeyId {
  bool is_str = false;
  int64_t int_key = 0;  // int keys
  std::string name;     // string keys

  // Key i of a call's key list.
  static KeyId Of(const KeyList& keys, int i) {
    KeyId k;
    k.is_str = keys.kind == KeyKind::kStr;
    if (k.is_str) k.name = keys.strs[i];
    else k.int_key = keys.ints[i];
    return k;
  }
  // The key a data message names.
  static KeyId FromWire(const WireHeader& h, const std::string& str) {
    KeyId k;
    k.is_str = (h.flags & kFlagStrKey) != 0;
    if (k.is_str) k.name = str;
    else k.int_key = h.key;
    return k;
  }

  // "3" or "\"weight\"" for messages (as KeyList::Name).
  std::string Display() const { return is_str ? "\"" + name + "\"" : std::to_string(int_key); }

  // Sets the header's key fields and the string frame of a data message naming this key.
  void ToWire(WireHeader* h, std::string* str) const {
    h->flags = (h->flags & ~kFlagStrKey) | (is_str ? kFlagStrKey : 0u);
    h->key = is_str ? 0 : int_key;
    if (is_str) *str = name;
  }

  // Where the parts of a value of `total` elements in rows of `row_len` live (PlanParts).
  std::vector<PartPlan> Parts(int64_t total, int num_servers, int64_t bound, int64_t row_len) const {
    return PlanParts(is_str, int_key, name, total, num_servers, bound, row_len);
  }
};

}  // namespace dist
}  // namespace kvstore
