// key.h - the identity of a key of a distributed store, in the one encoding every node
// uses: how it travels (the header's key, or the string frame with kFlagStrKey), how a node
// files it (MapKey), how messages name it (Display) and where its parts live (Parts).
//
// Invariants. An int key and a string key never share a MapKey ("i" + the 8 bytes of the
// int, "s" + the text), so one map can hold both kinds. A string key travels by its text
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

  // The map key of key i of `keys`, without building a KeyId.
  static std::string MapKeyOf(const KeyList& keys, int i) {
    return keys.kind == KeyKind::kStr ? EncodeStr(keys.strs[i]) : EncodeInt(keys.ints[i]);
  }
  // The map key of the key a data message names, without building a KeyId.
  static std::string MapKeyOf(const WireHeader& h, const std::string& str) {
    return (h.flags & kFlagStrKey) != 0 ? EncodeStr(str) : EncodeInt(h.key);
  }
  std::string MapKey() const { return is_str ? EncodeStr(name) : EncodeInt(int_key); }

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

 private:
  static std::string EncodeInt(int64_t k) {
    std::string id("i");
    id.append(reinterpret_cast<const char*>(&k), sizeof(k));
    return id;
  }
  static std::string EncodeStr(const std::string& s) { return "s" + s; }
};

}  // namespace dist
}  // namespace kvstore
