// ps.h - the entry points of the scheduler, server and worker (the rendezvous that servers
// and workers share is in scheduler_link.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"
#include "optimizer/updater.h"
#include "ps/config.h"
#include "ps/scheduler_link.h"

namespace kvstore {
namespace dist {

// Runs the scheduler of the job on the calling thread until every worker has finished
// and the servers have stopped. Throws TIMEOUT/NETWORK, or PEER_DEAD after a job in which
// nodes died.
void RunScheduler(const Config& cfg);

// What a server program installed on its store before KVStoreRunServer.
struct ServerHooks {
  std::shared_ptr<Updater> updater;
  std::shared_ptr<Updater> str_updater;
  std::string optimizer_spec;  // the spec `updater` was created from, "" otherwise
  KVController controller = nullptr;
  void* controller_data = nullptr;
};

// Runs a server on the calling thread (updaters and the controller run here) until the
// scheduler says every worker is done. Throws NETWORK/TIMEOUT/PEER_DEAD.
void RunServer(const Config& cfg, ServerHooks* hooks);

// A worker store that has joined the job (the constructor blocks for the rendezvous).
std::unique_ptr<Store> CreateWorkerStore(const std::string& type, const Config& cfg);

}  // namespace dist
}  // namespace kvstore
