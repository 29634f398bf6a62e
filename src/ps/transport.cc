// transport.cc - socket setup shared by every node (transport.h).
#include "ps/transport.h"

#include <memory>

#include "ps/security.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

// CurveZMQ's MESSAGE command adds a fixed overhead to every frame on the wire (command name,
// nonce, flags, MAC: 33 bytes); ZMQ_MAXMSGSIZE bounds the wire frame.
constexpr int64_t kCurveFrameOverhead = 64;

void ConfigureSocket(zmq::socket_t& sock, Link link) {
  sock.set(zmq::sockopt::sndhwm, 0);
  sock.set(zmq::sockopt::rcvhwm, 0);
  sock.set(zmq::sockopt::linger, 2000);
  const bool sched = link == Link::kSchedulerListen || link == Link::kToScheduler;
  const int64_t bound = sched ? int64_t{kMaxStringFrame} : MaxMessageBytes();
  sock.set(zmq::sockopt::maxmsgsize, bound + kCurveFrameOverhead);
  std::shared_ptr<const JobKeys> keys = ProcessJobKeys();
  if (!keys) return;
  const bool listen = link == Link::kSchedulerListen || link == Link::kServerListen;
  if (listen) {
    sock.set(zmq::sockopt::curve_server, true);
    sock.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys->listen_secret, 32));
    sock.set(zmq::sockopt::zap_domain, "kvstore");
  } else {
    sock.set(zmq::sockopt::curve_serverkey, zmq::const_buffer(keys->listen_public, 32));
    sock.set(zmq::sockopt::curve_publickey, zmq::const_buffer(keys->member_public, 32));
    sock.set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys->member_secret, 32));
  }
}

}  // namespace dist
}  // namespace kvstore
