// server_states.cc - a server's side of save_optimizer_states / load_optimizer_states
// (protocol in ps/dist_states.h): its optimizer's state of the key parts it holds, out as
// a SAVE_STATES reply and in from a LOAD_STATES request. The server's one thread runs these
// between requests, so no update is half done while the state is copied or replaced.
#include <memory>
#include <string>
#include <utility>

#include "core/dtype.h"
#include "optimizer/states.h"
#include "ps/key.h"
#include "ps/log.h"
#include "ps/security.h"
#include "ps/server.h"

namespace kvstore {
namespace dist {
namespace server {
namespace {

// The built-in optimizer whose state the server keeps; NOT_SUPPORTED for anything else
// (no updater, or a server program's own updater: its state is that program's).
optimizer::StateHolder* HolderOf(const ServerHooks& hooks, int rank) {
  auto* holder = dynamic_cast<optimizer::StateHolder*>(hooks.updater.get());
  KV_CHECK(holder != nullptr && hooks.str_updater == nullptr, KV_ERR_NOT_SUPPORTED,
           "server %d has %s; only a built-in optimizer (set_optimizer) keeps state that can be "
           "saved and loaded", rank, hooks.updater ? "an updater of its server program" : "no optimizer");
  return holder;
}

}  // namespace

void Server::HandleSaveStates(const Message& m) {
  WireHeader h = MakeHeader(MsgType::kReply, Role::kServer, rank_);
  h.req_id = m.h.req_id;
  std::string msg;
  OutPayload p;
  try {
    optimizer::StateHolder* holder = HolderOf(*hooks_, rank_);
    optimizer::StatesFile file;
    file.optimizer = holder->OptimizerName();
    file.spec = holder->Spec();
    file.keys = holder->SaveStates();
    auto buf = std::make_shared<SharedBuf>();
    const std::string bytes = optimizer::EncodeStatesFile(file);
    KV_CHECK(static_cast<int64_t>(bytes.size()) <= MaxMessageBytes(), KV_ERR_NOT_SUPPORTED,
             "server %d: its optimizer states take %zu bytes, more than one message may carry "
             "(KVSTORE_MAX_MESSAGE_BYTES=%lld)", rank_, bytes.size(),
             static_cast<long long>(MaxMessageBytes()));
    buf->msg = zmq::message_t(bytes.data(), bytes.size());
    p.buf = std::move(buf);
    p.nbytes = bytes.size();
  } catch (const std::exception& e) {
    h.status = ErrorCode(e);
    msg = e.what();
  }
  SendMessage(sock_, &m.routing_id, h, msg, p, &shm_);
}

void Server::HandleLoadStates(const Message& m) {
  const bool apply = m.h.arg == 1;
  int status = 0;
  std::string msg;
  try {
    optimizer::StateHolder* holder = HolderOf(*hooks_, rank_);
    const std::string what = StrFormat("(the LOAD_STATES of worker %d)", m.h.sender_rank);
    optimizer::StatesFile file = optimizer::DecodeStatesFile(
        std::string(static_cast<const char*>(m.payload.data()), m.payload.size()), what);
    for (const optimizer::KeyRecord& r : file.keys) {
      KeyId id;
      id.is_str = r.is_str;
      id.int_key = r.key;
      id.name = r.str_key;
      const KeyState* found = keys_.Find(id.is_str, id.int_key, id.name);
      KV_CHECK(found != nullptr, KV_ERR_UNKNOWN_KEY, "server %d holds no part of key %s", rank_,
               id.Display().c_str());
      const KeyState& k = *found;
      KV_CHECK(r.dtype == k.dtype && ShapeSize(r.shape) == k.count, KV_ERR_SHAPE_MISMATCH,
               "server %d: the state sent for key %s is for %s %s, its part is %lld elements of %s",
               rank_, id.Display().c_str(), DTypeName(r.dtype), ShapeToString(r.shape).c_str(),
               static_cast<long long>(k.count), DTypeName(k.dtype));
    }
    holder->LoadStates(&file, what, apply);
    if (apply && cfg_.verbose >= 1) Log("optimizer states loaded from worker %d", m.h.sender_rank);
  } catch (const std::exception& e) {
    status = ErrorCode(e);
    msg = e.what();
  }
  Reply(m.routing_id, m.h.req_id, status, msg);
}

}  // namespace server
}  // namespace dist
}  // namespace kvstore
