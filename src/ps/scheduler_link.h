// scheduler_link.h - a server's or worker's connection to the scheduler: the rendezvous,
// the heartbeats it sends, and the liveness of the scheduler as this node sees it.
//
// Protocol. The node connects one DEALER to the scheduler's ROUTER, sends REGISTER (its
// requested rank and "host[:ports]") and waits for NODE_TABLE (its rank and the servers) or
// ABORT. From then on it sends a HEARTBEAT every Config::heartbeat_interval_sec, and counts
// the scheduler as silent once nothing (not even a HEARTBEAT_ACK) arrived for
// Config::heartbeat_timeout_sec. What a node does about a silent scheduler is its own
// business (a server stops, a worker fails its requests).
//
// The link's clock starts at Join: heartbeats and silence mean nothing before it.
//
// Threads. A SchedulerLink is used by one thread at a time (the server's only thread, the
// worker's I/O thread after the rendezvous); it has no locks.
#pragma once

#include <zmq.hpp>

#include <vector>

#include "ps/config.h"
#include "ps/node_table.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

// What the rendezvous tells a server or worker.
struct JoinResult {
  int rank = -1;
  int num_workers = 0;
  int num_servers = 0;
  std::vector<NodeInfo> servers;
};

// Rendezvous of a server or worker: connects `sched` to the scheduler, registers
// (advertising `listen_ports`, none for workers) and waits for the node table. Throws
// TIMEOUT after Config::timeout_sec, NETWORK/PEER_DEAD when refused, PROTOCOL on a table
// that does not match the configuration.
JoinResult JoinJob(zmq::socket_t& sched, const Config& cfg, const std::vector<int>& listen_ports);

class SchedulerLink {
 public:
  // Creates and configures the DEALER (Link::kToScheduler); nothing is sent before Join.
  SchedulerLink(zmq::context_t& ctx, const Config& cfg);

  // The rendezvous (JoinJob); afterwards the scheduler counts as heard from, and the first
  // heartbeat is due at once.
  JoinResult Join(const std::vector<int>& listen_ports);

  // The socket, for polling and for the node's own requests to the scheduler (barriers,
  // FINISH, ...). Messages received from it must go through Recv.
  zmq::socket_t& socket() { return sock_; }

  // The next valid message from the scheduler, if any (non-blocking; the caller polled).
  // Any valid message counts as a sign of life.
  bool Recv(Message* m);

  // Sends a heartbeat when one is due at `now`.
  void HeartbeatIfDue(double now);
  // When the next heartbeat is due (NowSec() clock).
  double next_heartbeat() const { return next_heartbeat_; }

  // Seconds since the scheduler last sent a valid message.
  double Silence(double now) const { return now - last_heard_; }
  // Whether that silence exceeds the heartbeat timeout.
  bool Silent(double now) const { return Silence(now) > cfg_.heartbeat_timeout_sec; }

 private:
  const Config cfg_;
  zmq::socket_t sock_;
  int rank_ = -1;  // after Join
  double last_heard_ = 0;
  double next_heartbeat_ = 0;
};

}  // namespace dist
}  // namespace kvstore
