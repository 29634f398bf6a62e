// dist_states.cc - joining the servers' optimizer states into one file and cutting a file
// into the servers' parts (see dist_states.h for the protocol).
#include "ps/dist_states.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"
#include "ps/key.h"

namespace kvstore {
namespace dist {
namespace {

KeyId IdOf(const optimizer::KeyRecord& r) {
  KeyId id;
  id.is_str = r.is_str;
  id.int_key = r.key;
  id.name = r.str_key;
  return id;
}

const PartPlan* PartOn(const WorkerKey& k, int server) {
  for (const PartPlan& p : k.parts) {
    if (p.server == server) return &p;
  }
  return nullptr;
}

// The worker's record of the key a record names, or nullptr.
const WorkerKey* Lookup(const WorkerKeys& keys, const optimizer::KeyRecord& r) {
  return keys.Find(r.is_str, r.key, r.str_key);
}

bool Before(const optimizer::KeyRecord& a, const optimizer::KeyRecord& b) {
  return a.is_str ? a.str_key < b.str_key : a.key < b.key;
}

// A server's part of a key, as its SAVE_STATES reply gave it.
struct PartState {
  const PartPlan* part;
  int server;
  optimizer::KeyRecord record;
};

// The whole key from its parts (all present, in any order).
optimizer::KeyRecord Join(const WorkerKey& k, std::vector<PartState>* parts) {
  std::sort(parts->begin(), parts->end(),
            [](const PartState& a, const PartState& b) { return a.part->offset < b.part->offset; });
  const optimizer::KeyRecord& first = parts->front().record;
  for (const PartState& p : *parts) {
    KV_CHECK(p.record.steps == first.steps && p.record.arrays.size() == first.arrays.size(),
             KV_ERR_INTERNAL,
             "save_optimizer_states: the parts of key %s disagree: server %d has %lld updates and "
             "%zu state arrays, server %d %lld and %zu", k.display.c_str(), parts->front().server,
             static_cast<long long>(first.steps), first.arrays.size(), p.server,
             static_cast<long long>(p.record.steps), p.record.arrays.size());
  }
  optimizer::KeyRecord out = first;
  out.shape = k.shape;
  for (size_t a = 0; a < out.arrays.size(); ++a) {
    optimizer::StateArray& joined = out.arrays[a];
    joined.shape = k.shape;
    joined.bytes.clear();
    for (const PartState& p : *parts) {
      const optimizer::StateArray& piece = p.record.arrays[a];
      KV_CHECK(piece.dtype == joined.dtype &&
                   piece.bytes.size() == static_cast<size_t>(p.part->count) * DTypeSize(piece.dtype),
               KV_ERR_PROTOCOL, "save_optimizer_states: server %d's state array %zu of key %s does "
               "not fit its part of %lld elements", p.server, a, k.display.c_str(),
               static_cast<long long>(p.part->count));
      joined.bytes.insert(joined.bytes.end(), piece.bytes.begin(), piece.bytes.end());
    }
  }
  return out;
}

}  // namespace

optimizer::StatesFile JoinServerStates(const std::vector<std::string>& payloads,
                                       const WorkerKeys& keys) {
  optimizer::StatesFile out;
  // By the key's order_id: keys in the order they were initialised.
  std::map<uint64_t, std::pair<const WorkerKey*, std::vector<PartState>>> by_key;
  for (size_t s = 0; s < payloads.size(); ++s) {
    const int server = static_cast<int>(s);
    optimizer::StatesFile reply;
    try {
      reply = optimizer::DecodeStatesFile(payloads[s], StrFormat("(the reply of server %d)", server));
    } catch (const Error& e) {
      KV_FAIL(KV_ERR_PROTOCOL, "save_optimizer_states: %s", e.what());
    }
    if (s == 0) {
      out.optimizer = reply.optimizer;
      out.spec = reply.spec;
    }
    KV_CHECK(reply.optimizer == out.optimizer && reply.spec == out.spec, KV_ERR_INVALID_ARGUMENT,
             "save_optimizer_states: server 0 runs %s but server %d runs %s", out.spec.c_str(), server,
             reply.spec.c_str());
    for (optimizer::KeyRecord& r : reply.keys) {
      const WorkerKey* found = Lookup(keys, r);
      KV_CHECK(found != nullptr, KV_ERR_UNKNOWN_KEY,
               "save_optimizer_states: server %d has optimizer state for key %s, which this worker "
               "never initialised (init every key on the saving worker)", server,
               IdOf(r).Display().c_str());
      const WorkerKey& k = *found;
      const PartPlan* part = PartOn(k, server);
      KV_CHECK(part != nullptr && r.dtype == k.dtype && ShapeSize(r.shape) == part->count,
               KV_ERR_PROTOCOL, "save_optimizer_states: server %d's state of key %s is for %s %s, "
               "not for its part of the key", server, k.display.c_str(), DTypeName(r.dtype),
               ShapeToString(r.shape).c_str());
      auto& slot = by_key[k.order_id];
      slot.first = &k;
      slot.second.push_back(PartState{part, server, std::move(r)});
    }
  }
  for (auto& entry : by_key) {
    const WorkerKey& k = *entry.second.first;
    std::vector<PartState>& parts = entry.second.second;
    if (parts.size() != k.parts.size()) {
      std::string have;
      for (const PartState& p : parts) have += StrFormat("%s%d", have.empty() ? "" : ", ", p.server);
      KV_FAIL(KV_ERR_INTERNAL, "save_optimizer_states: key %s has optimizer state on server(s) %s "
              "but not on all %zu servers that hold its parts", k.display.c_str(), have.c_str(),
              k.parts.size());
    }
    out.keys.push_back(Join(k, &parts));
  }
  std::sort(out.keys.begin(), out.keys.end(), Before);
  return out;
}

void CheckStatesAgainstKeys(const optimizer::StatesFile& file, const WorkerKeys& keys,
                            const std::string& path) {
  for (const optimizer::KeyRecord& r : file.keys) {
    const WorkerKey* found = Lookup(keys, r);
    // A store holds keys of one kind (WorkerStore::CheckKind): a record of the other kind is
    // a kind mismatch, not an unknown key.
    if (found == nullptr && keys.size() > 0) {
      const bool store_str = keys.CountOf(true) > 0;
      KV_CHECK(store_str == r.is_str, KV_ERR_KEY_KIND_MISMATCH,
               "optimizer states file '%s' has %s keys but this store uses %s keys", path.c_str(),
               r.is_str ? "string" : "int", store_str ? "string" : "int");
    }
    KV_CHECK(found != nullptr, KV_ERR_UNKNOWN_KEY,
             "optimizer states file '%s' has state for key %s, which is not initialised in this store",
             path.c_str(), r.Name().c_str());
    const WorkerKey& k = *found;
    KV_CHECK(r.dtype == k.dtype, KV_ERR_DTYPE_MISMATCH,
             "optimizer states file '%s': key %s was saved for a %s weight but the stored value is %s",
             path.c_str(), r.Name().c_str(), DTypeName(r.dtype), DTypeName(k.dtype));
    KV_CHECK(r.shape == k.shape, KV_ERR_SHAPE_MISMATCH,
             "optimizer states file '%s': key %s was saved for a weight of shape %s but the stored "
             "value has shape %s", path.c_str(), r.Name().c_str(), ShapeToString(r.shape).c_str(),
             ShapeToString(k.shape).c_str());
    for (size_t a = 0; a < r.arrays.size(); ++a) {
      KV_CHECK(ShapeSize(r.arrays[a].shape) == k.size, KV_ERR_SHAPE_MISMATCH,
               "optimizer states file '%s': key %s state array %zu has shape %s but the weight has "
               "shape %s", path.c_str(), r.Name().c_str(), a, ShapeToString(r.arrays[a].shape).c_str(),
               ShapeToString(k.shape).c_str());
    }
  }
}

std::vector<std::string> SplitForServers(const optimizer::StatesFile& file, const WorkerKeys& keys,
                                         int num_servers) {
  std::vector<optimizer::StatesFile> per(static_cast<size_t>(num_servers));
  for (optimizer::StatesFile& f : per) {
    f.optimizer = file.optimizer;
    f.spec = file.spec;
  }
  for (const optimizer::KeyRecord& r : file.keys) {  // file order: each server's stays sorted
    const WorkerKey* found = Lookup(keys, r);
    KV_CHECK(found != nullptr, KV_ERR_INTERNAL, "load_optimizer_states: key %s was not checked",
             r.Name().c_str());
    const WorkerKey& k = *found;
    for (const PartPlan& p : k.parts) {
      optimizer::KeyRecord piece;
      piece.is_str = r.is_str;
      piece.key = r.key;
      piece.str_key = r.str_key;
      piece.dtype = r.dtype;
      piece.shape = {p.count};
      piece.steps = r.steps;
      for (const optimizer::StateArray& a : r.arrays) {
        optimizer::StateArray slice;
        slice.dtype = a.dtype;
        slice.shape = {p.count};
        const size_t esize = DTypeSize(a.dtype);
        const auto begin = a.bytes.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(p.offset) * esize);
        slice.bytes.assign(begin, begin + static_cast<std::ptrdiff_t>(static_cast<size_t>(p.count) * esize));
        piece.arrays.push_back(std::move(slice));
      }
      per[static_cast<size_t>(p.server)].keys.push_back(std::move(piece));
    }
  }
  std::vector<std::string> out;
  out.reserve(per.size());
  for (const optimizer::StatesFile& f : per) out.push_back(optimizer::EncodeStatesFile(f));
  return out;
}

std::vector<OutMsg> LoadMessages(const WorkerIo& io, const std::vector<std::string>& payloads,
                                 bool apply, const std::shared_ptr<Waiter>& w) {
  std::vector<OutMsg> v;
  for (int s = 0; s < io.num_servers(); ++s) {
    OutMsg om;
    om.dest = s;
    om.h = io.Header(MsgType::kLoadStates);
    om.h.arg = apply ? 1 : 0;
    auto buf = std::make_shared<SharedBuf>();
    buf->msg = zmq::message_t(payloads[s].data(), payloads[s].size());
    om.payload.buf = std::move(buf);
    om.payload.nbytes = payloads[s].size();
    om.waiter = w;
    v.push_back(std::move(om));
  }
  return v;
}

}  // namespace dist
}  // namespace kvstore
