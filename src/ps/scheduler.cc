// scheduler.cc - rendezvous, barriers, failure detection and shutdown of a job.
//
// Protocol, in order:
//   1. Every server and worker sends REGISTER (its host, a server's ports, an optional requested
//      rank). When W workers and S servers have registered, ranks are assigned and every
//      node receives NODE_TABLE (its rank and the servers' addresses). Registration has a
//      deadline; on expiry the registered nodes get ABORT naming what is missing.
//   2. While the job runs, every node sends HEARTBEAT; any message counts as a sign of
//      life. A node silent for longer than the heartbeat timeout is dead: every live node
//      receives NODE_DEAD and barriers that include it fail with PEER_DEAD naming it.
//   3. BARRIER(group mask) completes when every live member of the groups has arrived; it
//      fails on a dead or departed member, or on the timeout, naming the missing nodes.
//   4. A worker that is done sends FINISH. When every worker has finished or died, the
//      servers receive SHUTDOWN; the scheduler returns once they acknowledged or died.
// Everything runs on the thread that called KVStoreRunServer; there is no other thread.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "ps/clock.h"
#include "ps/log.h"
#include "ps/node_table.h"
#include "ps/ps.h"
#include "ps/security.h"
#include "ps/transport.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

namespace {

// The IPv4 addresses of this host's interfaces.
std::set<uint32_t> LocalAddresses() {
  std::set<uint32_t> out;
  struct ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return out;
  for (struct ifaddrs* p = ifs; p != nullptr; p = p->ifa_next) {
    if (p->ifa_addr != nullptr && p->ifa_addr->sa_family == AF_INET) {
      out.insert(reinterpret_cast<struct sockaddr_in*>(p->ifa_addr)->sin_addr.s_addr);
    }
  }
  freeifaddrs(ifs);
  return out;
}

// The first address `name` resolves to that belongs to this host; "" when none does.
std::string ResolveToLocalAddress(const std::string& name) {
  struct addrinfo hints {};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &res) != 0) return "";
  const std::set<uint32_t> local = LocalAddresses();
  std::string found;
  for (struct addrinfo* p = res; p != nullptr && found.empty(); p = p->ai_next) {
    const auto* sin = reinterpret_cast<const struct sockaddr_in*>(p->ai_addr);
    char buf[INET_ADDRSTRLEN];
    if (local.count(sin->sin_addr.s_addr) != 0 &&
        inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) != nullptr) {
      found = buf;
    }
  }
  freeaddrinfo(res);
  return found;
}

// Binds the scheduler's socket; returns the endpoint. The scheduler listens only where the
// job told it to, because a wildcard nobody asked for exposes the job on every interface:
//   1. KVSTORE_SCHEDULER_BIND when set: an IPv4 address or interface name of this host, or
//      "*" for every interface (for a root URI this host cannot bind: NAT, a load balancer,
//      a Kubernetes ClusterIP service); "*" is logged.
//   2. Otherwise DMLC_PS_ROOT_URI as given (an IPv4 address or interface name), else the
//      first address it resolves to that belongs to this host ("localhost", a host name, a
//      Kubernetes headless service).
// Anything else is a NETWORK error naming the address, the port and the variables.
std::string BindScheduler(const Config& cfg, zmq::socket_t& sock) {
  const std::string port = std::to_string(cfg.root_port);
  if (!cfg.scheduler_bind.empty()) {
    const char* opt = cfg.scheduler_bind.c_str();
    const std::string ep = "tcp://" + cfg.scheduler_bind + ":" + port;
    try {
      sock.bind(ep);
    } catch (const zmq::error_t& e) {
      KV_FAIL(KV_ERR_NETWORK, "scheduler cannot listen on %s (KVSTORE_SCHEDULER_BIND=%s, "
              "DMLC_PS_ROOT_PORT=%s): %s", ep.c_str(), opt, port.c_str(), e.what());
    }
    if (std::strcmp(opt, "*") == 0) {
      Log("listening on every interface, port %s (KVSTORE_SCHEDULER_BIND=*); nodes reach it "
          "at %s", port.c_str(), cfg.SchedulerEndpoint().c_str());
    }
    return ep;
  }
  const std::string ep = cfg.SchedulerEndpoint();
  int err = 0;
  try {
    sock.bind(ep);
    return ep;
  } catch (const zmq::error_t& e) {
    err = e.num();
  }
  std::string resolved;
  if (err != EADDRINUSE) resolved = ResolveToLocalAddress(cfg.root_uri);
  if (!resolved.empty()) {
    const std::string alt = "tcp://" + resolved + ":" + port;
    try {
      sock.bind(alt);
      if (cfg.verbose >= 1) {
        Log("DMLC_PS_ROOT_URI=%s is %s on this host", cfg.root_uri.c_str(), resolved.c_str());
      }
      return alt;
    } catch (const zmq::error_t& e) {
      err = e.num();
    }
  }
  if (err == EADDRINUSE) {
    KV_FAIL(KV_ERR_NETWORK, "scheduler cannot listen on %s: port %s is in use "
            "(DMLC_PS_ROOT_PORT=%s)", ep.c_str(), port.c_str(), port.c_str());
  }
  KV_FAIL(KV_ERR_NETWORK, "scheduler cannot listen on %s: %s; DMLC_PS_ROOT_URI=%s is not an "
          "address of this host (nor a name that resolves to one). Run the scheduler where "
          "DMLC_PS_ROOT_URI points, or set KVSTORE_SCHEDULER_BIND to the address or interface "
          "to listen on (* = every interface, e.g. when DMLC_PS_ROOT_URI is a NAT or "
          "load-balancer address)", ep.c_str(), zmq_strerror(err), cfg.root_uri.c_str());
}

struct Node {
  Role role;
  int requested_rank;
  int rank = -1;
  std::string host;
  std::vector<int> ports;  // servers
  std::string routing_id;
  double last_seen = 0;
  bool dead = false;
  bool finished = false;   // workers: FINISH received; servers: SHUTDOWN_ACK received
};

// "host" for workers, "host:P0[,P1...]" for servers (log lines and error messages).
std::string Where(const Node& n) {
  return n.ports.empty() ? n.host : n.host + ":" + FormatPorts(n.ports);
}

struct PendingBarrier {
  int group = 0;
  double started = 0;
  std::map<int, uint64_t> arrived;  // node index -> req_id
};

class Scheduler {
 public:
  explicit Scheduler(const Config& cfg) : cfg_(cfg), ctx_(1), sock_(ctx_, zmq::socket_type::router) {}

  void Run();

 private:
  void Rendezvous();
  [[noreturn]] void AbortRendezvous();
  void Register(const Message& m);
  void SendNodeTables();
  void AssignRanks(Role role, int count);
  void Handle(Message& m);
  void FromUnregistered(const Message& m);
  void JoinBarrier(int i, const Message& m);
  void AnswerQueryDead(const Node& n, const Message& m);
  void CheckLiveness();
  void ProgressBarriers();
  void MaybeShutdown();
  bool ServersStopped() const;
  void Send(const Node& n, WireHeader h, const std::string& str = "") {
    SendMessage(sock_, &n.routing_id, h, str, OutPayload{});
  }
  WireHeader Header(MsgType t) { return MakeHeader(t, Role::kScheduler, 0); }
  // The header of the answer to request `m`.
  WireHeader ReplyHeader(MsgType t, const Message& m) {
    WireHeader h = Header(t);
    h.req_id = m.h.req_id;
    return h;
  }
  bool InGroup(const Node& n, int group) const {
    return (n.role == Role::kServer && (group & KV_NODE_SERVERS)) ||
           (n.role == Role::kWorker && (group & KV_NODE_WORKERS));
  }
  int FindNode(const std::string& rid) const {
    auto it = by_rid_.find(rid);
    return it == by_rid_.end() ? -1 : it->second;
  }
  void Broadcast(WireHeader h, const std::string& str) {
    for (const auto& n : nodes_) {
      if (!n.dead && !(n.role == Role::kWorker && n.finished)) Send(n, h, str);
    }
  }

  Config cfg_;
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  AuthGuard guard_{ctx_, sock_, "scheduler"};  // before sock_ binds; closed first
  std::vector<Node> nodes_;
  std::map<std::string, int> by_rid_;
  std::map<int, PendingBarrier> barriers_;  // by group mask
  std::vector<std::string> dead_names_;
  bool shutdown_sent_ = false;
  double shutdown_started_ = 0;
};

void Scheduler::Run() {
  ConfigureSocket(sock_, Link::kSchedulerListen);
  sock_.set(zmq::sockopt::router_mandatory, 0);
  const std::string ep = BindScheduler(cfg_, sock_);
  if (cfg_.verbose >= 1) Log("listening on %s for %d workers and %d servers", ep.c_str(),
                             cfg_.num_workers, cfg_.num_servers);
  Rendezvous();
  for (;;) {
    zmq::pollitem_t item{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(
                            static_cast<long>(cfg_.heartbeat_interval_sec * 1000 / 2) + 1));
    for (;;) {
      Message m;
      if (!RecvValidMessage(sock_, true, "a node", &m)) break;
      Handle(m);
    }
    CheckLiveness();
    ProgressBarriers();
    MaybeShutdown();
    if (ServersStopped()) break;
  }
  if (cfg_.verbose >= 1) Log("job finished");
  if (!dead_names_.empty()) {
    std::string list;
    for (const auto& d : dead_names_) list += (list.empty() ? "" : ", ") + d;
    KV_FAIL(KV_ERR_PEER_DEAD, "the job finished without: %s", list.c_str());
  }
}

// Step 1 of the protocol: waits until the whole job has registered, then sends every node
// its rank and the node table. Throws TIMEOUT (after telling the registered nodes) when the
// job is not complete within the timeout.
void Scheduler::Rendezvous() {
  const int expect = cfg_.num_workers + cfg_.num_servers;
  const double deadline = DeadlineAfter(cfg_.timeout_sec);
  while (static_cast<int>(nodes_.size()) < expect) {
    const double left = deadline - NowSec();
    if (left <= 0) AbortRendezvous();
    zmq::pollitem_t item{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0};
    const double wait_ms = std::min(left * 1000, 500.0);
    zmq::poll(&item, 1, std::chrono::milliseconds(static_cast<long>(wait_ms) + 1));
    for (;;) {
      Message m;
      if (!RecvValidMessage(sock_, true, "a node", &m)) break;
      if (m.h.type != static_cast<uint16_t>(MsgType::kRegister)) continue;  // too early
      if (FindNode(m.routing_id) >= 0) continue;                            // duplicate
      Register(m);
    }
  }
  AssignRanks(Role::kServer, cfg_.num_servers);
  AssignRanks(Role::kWorker, cfg_.num_workers);
  SendNodeTables();
}

// ABORT to every registered node, naming what is missing; then TIMEOUT.
void Scheduler::AbortRendezvous() {
  int w = 0, s = 0;
  for (const auto& n : nodes_) (n.role == Role::kWorker ? w : s)++;
  const std::string why = StrFormat(
      "rendezvous timed out after %.0f s: %d of %d workers and %d of %d servers "
      "registered with the scheduler at %s",
      cfg_.timeout_sec, w, cfg_.num_workers, s, cfg_.num_servers,
      cfg_.SchedulerEndpoint().c_str());
  WireHeader h = Header(MsgType::kAbort);
  h.status = KV_ERR_TIMEOUT;
  Broadcast(h, why);
  KV_FAIL(KV_ERR_TIMEOUT, "%s", why.c_str());
}

// REGISTER from a new routing id: the node joins, unless its group is full or a server
// sent no valid port list (it gets ABORT).
void Scheduler::Register(const Message& m) {
  Node n;
  n.role = static_cast<Role>(m.h.sender_role);
  n.requested_rank = m.h.arg;
  n.routing_id = m.routing_id;
  n.last_seen = NowSec();
  const size_t colon = m.str.rfind(':');
  n.host = m.str.substr(0, colon == std::string::npos ? m.str.size() : colon);
  const bool ports_ok =
      colon != std::string::npos && ParsePorts(m.str.substr(colon + 1), &n.ports);
  int have = 0;
  for (const auto& o : nodes_) have += o.role == n.role;
  const int want = n.role == Role::kWorker ? cfg_.num_workers
                   : n.role == Role::kServer ? cfg_.num_servers : 0;
  if (have >= want || (n.role == Role::kServer && !ports_ok)) {
    WireHeader h = Header(MsgType::kAbort);
    h.status = KV_ERR_INVALID_ARGUMENT;
    Send(n, h,
         StrFormat("the job already has %d %ss (or the registration is malformed)", want,
                   RoleName(n.role)));
    LogDropped("rejected a %s registration from %s: job full or malformed", RoleName(n.role),
        m.str.c_str());
    return;
  }
  by_rid_[n.routing_id] = static_cast<int>(nodes_.size());
  nodes_.push_back(n);
  if (cfg_.verbose >= 1) Log("registered %s at %s", RoleName(n.role), m.str.c_str());
}

// NODE_TABLE to every node: its rank, and the servers' addresses.
void Scheduler::SendNodeTables() {
  std::vector<NodeInfo> servers;
  for (const auto& n : nodes_) {
    if (n.role == Role::kServer) servers.push_back({Role::kServer, n.rank, n.host, n.ports});
  }
  const std::string table = FormatTable(cfg_.num_workers, cfg_.num_servers, servers);
  for (auto& n : nodes_) {
    WireHeader h = Header(MsgType::kNodeTable);
    h.arg = n.rank;
    Send(n, h, table);
    n.last_seen = NowSec();
    if (cfg_.verbose >= 1) Log("%s is %s", NodeName(n.role, n.rank).c_str(), Where(n).c_str());
  }
}

// Requested ranks (DMLC_WORKER_ID / DMLC_SERVER_ID) are honoured when unique; the others
// take the free ranks in (host, port, registration) order, which is deterministic for a
// given set of hosts.
void Scheduler::AssignRanks(Role role, int count) {
  std::vector<int> idx;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (nodes_[i].role == role) idx.push_back(i);
  }
  std::vector<bool> taken(static_cast<size_t>(count), false);
  std::vector<int> rest;
  for (int i : idx) {
    const int r = nodes_[i].requested_rank;
    if (r >= 0 && r < count && !taken[static_cast<size_t>(r)]) {
      taken[static_cast<size_t>(r)] = true;
      nodes_[i].rank = r;
    } else {
      rest.push_back(i);
    }
  }
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) {
    if (nodes_[a].host != nodes_[b].host) return nodes_[a].host < nodes_[b].host;
    return nodes_[a].ports < nodes_[b].ports;
  });
  int next = 0;
  for (int i : rest) {
    while (taken[static_cast<size_t>(next)]) ++next;
    taken[static_cast<size_t>(next)] = true;
    nodes_[i].rank = next;
  }
}

void Scheduler::Handle(Message& m) {
  const int i = FindNode(m.routing_id);
  if (i < 0) {
    FromUnregistered(m);
    return;
  }
  Node& n = nodes_[static_cast<size_t>(i)];
  if (n.dead) return;  // declared dead; it does not come back
  n.last_seen = NowSec();
  if (cfg_.verbose >= 2) Log("%s from %s", MsgTypeName(m.h.type), NodeName(n.role, n.rank).c_str());
  switch (static_cast<MsgType>(m.h.type)) {
    case MsgType::kHeartbeat:
      Send(n, ReplyHeader(MsgType::kHeartbeatAck, m));
      break;
    case MsgType::kBarrier:
      JoinBarrier(i, m);
      break;
    case MsgType::kQueryDead:
      AnswerQueryDead(n, m);
      break;
    case MsgType::kFinish:
      n.finished = true;
      Send(n, ReplyHeader(MsgType::kFinishAck, m));
      if (cfg_.verbose >= 1) Log("%s finished", NodeName(n.role, n.rank).c_str());
      break;
    case MsgType::kShutdownAck:
      if (n.role == Role::kServer) n.finished = true;
      break;
    case MsgType::kRegister:
      break;  // a late duplicate
    default:
      LogDropped("dropped unexpected %s from %s", MsgTypeName(m.h.type), NodeName(n.role, n.rank).c_str());
  }
}

// A message from a routing id that did not register in time. A late REGISTER (a second
// dist store in one process, or a node of another job) gets ABORT saying why.
void Scheduler::FromUnregistered(const Message& m) {
  if (m.h.type == static_cast<uint16_t>(MsgType::kRegister)) {
    Node late;
    late.role = static_cast<Role>(m.h.sender_role);
    late.routing_id = m.routing_id;
    WireHeader h = Header(MsgType::kAbort);
    h.status = KV_ERR_INVALID_ARGUMENT;
    Send(late, h,
         StrFormat("the job is already running with %d workers and %d servers (a process can "
                   "hold one dist store)",
                   cfg_.num_workers, cfg_.num_servers));
  }
  LogDropped("dropped %s from an unregistered peer", MsgTypeName(m.h.type));
}

// BARRIER from node i: it waits in the barrier of its group mask (ProgressBarriers answers
// it); a mask that does not contain the node is refused at once.
void Scheduler::JoinBarrier(int i, const Message& m) {
  const Node& n = nodes_[static_cast<size_t>(i)];
  const int group = m.h.arg & (KV_NODE_SCHEDULER | KV_NODE_SERVERS | KV_NODE_WORKERS);
  if (group == 0 || !InGroup(n, group)) {
    WireHeader h = ReplyHeader(MsgType::kBarrierDone, m);
    h.status = KV_ERR_INVALID_ARGUMENT;
    Send(n, h, StrFormat("barrier group %d does not contain %s", m.h.arg,
                         NodeName(n.role, n.rank).c_str()));
    return;
  }
  PendingBarrier& b = barriers_[group];
  if (b.arrived.empty()) b.started = NowSec();
  b.group = group;
  b.arrived[i] = m.h.req_id;
}

// QUERY_DEAD: how many members of the group mask are dead or were silent for longer than
// the query's limit (key, in ms); finished workers do not count.
void Scheduler::AnswerQueryDead(const Node& n, const Message& m) {
  const double limit = static_cast<double>(std::max<int64_t>(m.h.key, 0)) / 1000.0;
  int64_t count = 0;
  for (const auto& o : nodes_) {
    if (!InGroup(o, m.h.arg)) continue;
    if (o.finished && o.role == Role::kWorker) continue;
    if (o.dead || NowSec() - o.last_seen > limit) ++count;
  }
  WireHeader h = ReplyHeader(MsgType::kQueryDeadReply, m);
  h.key = count;
  Send(n, h);
}

void Scheduler::CheckLiveness() {
  const double now = NowSec();
  for (auto& n : nodes_) {
    if (n.dead || n.finished) continue;
    if (now - n.last_seen <= cfg_.heartbeat_timeout_sec) continue;
    n.dead = true;
    const std::string name = NodeName(n.role, n.rank);
    dead_names_.push_back(name);
    const std::string why = StrFormat("%s (%s) sent no heartbeat for %.1f s and is considered dead",
                                      name.c_str(), Where(n).c_str(), now - n.last_seen);
    Log("%s", why.c_str());
    WireHeader h = Header(MsgType::kNodeDead);
    h.arg = static_cast<int32_t>(n.role);
    h.key = n.rank;
    Broadcast(h, why);
  }
}

void Scheduler::ProgressBarriers() {
  const double now = NowSec();
  for (auto it = barriers_.begin(); it != barriers_.end();) {
    PendingBarrier& b = it->second;
    std::string missing, gone;
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
      const Node& n = nodes_[static_cast<size_t>(i)];
      if (!InGroup(n, b.group) || b.arrived.count(i)) continue;
      std::string& list = (n.dead || (n.finished && n.role == Role::kWorker)) ? gone : missing;
      list += (list.empty() ? "" : ", ") + NodeName(n.role, n.rank);
    }
    int status = 0;
    std::string msg;
    if (!gone.empty()) {
      status = KV_ERR_PEER_DEAD;
      msg = "barrier cannot complete: " + gone + " died or left the job";
    } else if (missing.empty()) {
      status = 0;
    } else if (cfg_.timeout_sec > 0 && now - b.started > cfg_.timeout_sec) {
      status = KV_ERR_TIMEOUT;
      msg = StrFormat("barrier timed out after %.0f s waiting for %s", cfg_.timeout_sec,
                      missing.c_str());
    } else {
      ++it;
      continue;
    }
    for (const auto& a : b.arrived) {
      const Node& n = nodes_[static_cast<size_t>(a.first)];
      if (n.dead) continue;
      WireHeader h = Header(MsgType::kBarrierDone);
      h.req_id = a.second;
      h.status = status;
      Send(n, h, msg);
    }
    it = barriers_.erase(it);
  }
}

// After SHUTDOWN: whether every live server acknowledged it, or the grace period is over.
bool Scheduler::ServersStopped() const {
  if (!shutdown_sent_) return false;
  bool all_done = true;
  for (const auto& n : nodes_) {
    if (n.role == Role::kServer && !n.dead && !n.finished) all_done = false;
  }
  const double grace = std::max(5.0, cfg_.heartbeat_timeout_sec);
  return all_done || NowSec() - shutdown_started_ > grace;
}

void Scheduler::MaybeShutdown() {
  if (shutdown_sent_) return;
  for (const auto& n : nodes_) {
    if (n.role == Role::kWorker && !n.dead && !n.finished) return;
  }
  shutdown_sent_ = true;
  shutdown_started_ = NowSec();
  if (cfg_.verbose >= 1) Log("every worker is done; stopping the servers");
  for (const auto& n : nodes_) {
    if (n.role == Role::kServer && !n.dead) Send(n, Header(MsgType::kShutdown));
  }
}

}  // namespace

void RunScheduler(const Config& cfg) {
  SetLogPrefix("scheduler");
  Scheduler s(cfg);
  s.Run();
}

}  // namespace dist
}  // namespace kvstore
