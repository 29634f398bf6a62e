// transport.h - the sockets of a job and how every node sets them up.
//
// Topology. One scheduler, S servers, W workers. Every node keeps one DEALER socket to the
// scheduler's ROUTER (rendezvous, barriers, heartbeats, shutdown). Each server binds a
// ROUTER of its own; each worker keeps one DEALER per server. Workers never talk to workers
// and servers never talk to servers.
//
// Security. With a job secret every socket runs ZeroMQ's CURVE mechanism and only job
// members get past the handshake (security.h); every socket bounds the frames it accepts
// (Link), so that no peer can make a node buffer more than the job's largest value part.
#pragma once

#include <zmq.hpp>

namespace kvstore {
namespace dist {

// The four kinds of socket of a job. Listening sockets are CURVE servers, connecting ones
// CURVE clients (when the job has a secret). Links to and from the scheduler carry no values:
// their frames are bounded by kMaxStringFrame; links between workers and servers by
// MaxMessageBytes() (plus CURVE's per-frame overhead), so every worker must refuse to init
// a key whose part exceeds it (CheckPartsFit).
enum class Link {
  kSchedulerListen,  // the scheduler's ROUTER
  kServerListen,     // a server's ROUTER
  kToScheduler,      // a server's or worker's DEALER to the scheduler
  kToServer,         // a worker's DEALER to a server
};

// Socket setup shared by every node, before bind/connect: unlimited HWM, bounded linger, the
// link's frame bound, and its CURVE role and keys (ProcessJobKeys()). Throws what
// ProcessJobKeys / MaxMessageBytes throw.
void ConfigureSocket(zmq::socket_t& sock, Link link);

}  // namespace dist
}  // namespace kvstore
