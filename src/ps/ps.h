// dist.h - the entry points of the scheduler, server and worker, and the rendezvous step
// that servers and workers share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"
#include "optimizer/updater.h"
#include "ps/common.h"

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

// Rendezvous of a server or worker: connects `sched` to the scheduler, registers
// (advertising `listen_ports`, none for workers) and waits for the node table.
struct JoinResult {
  int rank = -1;
  int num_workers = 0;
  int num_servers = 0;
  std::vector<NodeInfo> servers;
};
JoinResult JoinJob(zmq::socket_t& sched, const Config& cfg, const std::vector<int>& listen_ports);

}  // namespace dist
}  // namespace kvstore
