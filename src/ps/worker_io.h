// worker_io.h - a worker's I/O loop: its sockets (the scheduler link and one DEALER per
// server), the send queue, the requests outstanding, their deadlines, and the liveness of
// the other nodes as the scheduler reports it.
//
// Protocol steps. Application threads Enqueue requests; the I/O thread sends what the send
// queue lets leave (send_queue.h), gives each sent request an id and a deadline, and
// completes it when its reply arrives, when its deadline passes (TIMEOUT naming the server
// and, through the Op, the key), when the scheduler reports its server dead (PEER_DEAD at
// once), or when the scheduler itself falls silent or aborts the job (everything queued or
// outstanding fails, and every later request at once). Completing a part of an Op may
// finish the Op (OpTracker::Finish); a control request completes its Waiter.
//
// Invariants. Every request leaves the queue exactly once and is completed exactly once
// (its queue ticket given back then); after Stop nothing is queued or outstanding.
//
// Threading. One I/O thread owns every socket, the outstanding requests and the scheduler
// link, and never blocks on anything but zmq_poll. Application threads only Enqueue (the
// send queue's lock) and read liveness (peers_mu_); neither lock is held while calling out.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/config.h"
#include "ps/op.h"
#include "ps/placement.h"
#include "ps/request_table.h"
#include "ps/scheduler_link.h"
#include "ps/send_queue.h"
#include "ps/shm.h"
#include "ps/wire.h"

namespace kvstore {
namespace dist {

// A request as queued: its destination, message, and what it completes.
struct OutMsg {
  int dest = -1;  // server rank, or -1 for the scheduler
  WireHeader h{};
  std::string str;
  OutPayload payload;
  std::shared_ptr<Op> op;  // a data request: one part of this Op
  PartPlan part{};
  std::shared_ptr<Waiter> waiter;  // a control request
  uint64_t order_key = 0;  // the key's order id; 0: unordered (control)
};

class WorkerIo {
 public:
  // Joins the job (the rendezvous), connects to every server and starts the I/O thread.
  // Operations finish through `tracker`, which must outlive this object.
  WorkerIo(const Config& cfg, OpTracker* tracker);
  ~WorkerIo() { Stop(); }
  WorkerIo(const WorkerIo&) = delete;
  WorkerIo& operator=(const WorkerIo&) = delete;

  int rank() const { return rank_; }
  int num_workers() const { return num_workers_; }
  int num_servers() const { return num_servers_; }
  WireHeader Header(MsgType t) const { return MakeHeader(t, Role::kWorker, rank_); }
  // Seconds a request may wait for its reply (0: forever).
  double RequestTimeout() const;

  // Queues `msgs` at `priority` (moved from) and wakes the I/O thread when needed.
  void Enqueue(std::vector<OutMsg>& msgs, int priority);

  // Stops the I/O thread; whatever is still queued or outstanding fails with NETWORK.
  // Idempotent.
  void Stop();

  // Liveness as the scheduler reported it (or as noticed: a silent scheduler): the dead
  // servers and/or workers known so far (KV_NODE_* mask), and whether the scheduler is.
  int KnownDead(int node_group, bool* scheduler_dead);
  // "the scheduler, server 1, worker 2" for the nodes known dead, or "".
  std::string DeadNodes();

 private:
  void Loop();
  void Wake();
  // Sends up to kSendSlice requests; true when it stopped at the slice (more may leave).
  bool SendQueued();
  // Makes `m` outstanding until `deadline` and transmits it (or holds it back, or fails it).
  void SendOne(OutMsg& m, const SendQueue<OutMsg>::Ticket& ticket, double deadline);
  void HandleReply(int server, Message& m);
  void HandleScheduler(Message& m);
  void NodeDead(const Message& m);
  void CheckScheduler(double now);
  struct Outstanding;
  void Complete(Outstanding& o, int status, const std::string& msg, Message* reply);
  void CheckDeadlines();
  void FailServer(int server, int code, const std::string& why);
  void FailAll(int code, const std::string& why);

  const Config cfg_;
  OpTracker* const tracker_;
  int rank_ = -1;
  int num_workers_ = 0;
  int num_servers_ = 0;

  zmq::context_t ctx_;  // before the sockets: destroyed after them
  SchedulerLink link_;
  std::vector<zmq::socket_t> servers_;
  std::vector<std::string> server_names_;  // "server <rank>", for log lines
  std::vector<ShmPeers> shm_;  // per server: its segment under "" while offered or accepted
  void OfferShm(int server);
  void ShmAnswered(int server, const Message& m);
  // Requests held back, per server in send order, while the server's ring has no room for
  // the first one's payload (shm.h MustWait): they are outstanding (deadlines, failures
  // apply) and leave, in order, once the server has read enough; one whose request was
  // completed meanwhile is dropped.
  struct Held {
    uint64_t id;
    OutMsg m;
  };
  std::vector<std::deque<Held>> held_;
  size_t held_start_ = 0;  // the server whose held requests go first next turn
  bool MustHold(const OutMsg& m);
  // Sends up to kSendSlice held requests; true when it stopped at the slice.
  bool SendHeld();
  bool Transmit(OutMsg& m, uint64_t id);
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  bool stopped_ = false;  // Stop ran (the application thread that calls it)
  std::thread thread_;

  SendQueue<OutMsg> queue_;  // its own lock

  // Guards the three below against application threads' reads; only the I/O thread
  // writes them, so it reads them without the lock.
  std::mutex peers_mu_;
  bool scheduler_dead_ = false;
  std::vector<bool> server_dead_;
  std::vector<bool> worker_dead_;

  // I/O thread only.
  struct Outstanding {
    // Takes `m`'s op and waiter (no reference counting per request); the rest of `m` stays.
    static Outstanding TakeFrom(OutMsg& m) {
      Outstanding o;
      o.op = std::move(m.op);
      o.waiter = std::move(m.waiter);
      o.dest = m.dest;
      o.part = m.part;
      o.type = static_cast<MsgType>(m.h.type);
      return o;
    }
    std::shared_ptr<Op> op;
    std::shared_ptr<Waiter> waiter;
    int dest = -1;
    PartPlan part{};
    double deadline = 0;
    MsgType type = MsgType::kPush;
    SendQueue<OutMsg>::Ticket ticket;  // given back when the request completes
  };
  // Data work per turn of the loop between two looks at heartbeats and the scheduler.
  static constexpr int kSendSlice = 1024;
  static constexpr int kRecvSlice = 1024;  // per server
  uint64_t next_req_ = 1;
  // One entry per request in flight, by id (request_table.h): oldest first, so that
  // CheckDeadlines looks only at the oldest ones.
  RequestTable<Outstanding> outstanding_;
  std::vector<std::pair<OutMsg, SendQueue<OutMsg>::Ticket>> popped_;  // SendQueued's slice
  // Tickets of completed requests not yet given back: the next SendQueued gives them back
  // under the lock it pops with (the window and pushes in flight matter only to pops).
  std::vector<SendQueue<OutMsg>::Ticket> done_;
};

// What one turn of the I/O loop sends of the requests held back per server (WorkerIo's
// held_; a template over the queue's item and the loop's checks, for its unit test).
// Queues are visited from *start on. In each, fronts that `completed(item)` says were
// completed meanwhile are dropped; fronts leave by `send(item)`, in order, until
// `must_hold(item)` says the server's ring has no room for the next, and at most `budget`
// leave in all: a long burst (a ring that came free under thousands of held requests) is
// sent over several turns, with the turn's heartbeat and replies in between. Returns true
// when it stopped at the budget, with *start at the next queue (each turn a different server
// goes first: one server's burst does not starve the others).
template <typename Item, typename Completed, typename MustHoldFn, typename Send>
bool SendHeldSlice(std::vector<std::deque<Item>>& held, size_t* start, int budget, Completed&& completed,
                   MustHoldFn&& must_hold, Send&& send) {
  const size_t n = held.size();
  int sent = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t s = (*start + i) % n;
    std::deque<Item>& q = held[s];
    while (!q.empty()) {
      if (completed(q.front())) {
        q.pop_front();
        continue;
      }
      if (must_hold(q.front())) break;
      if (sent == budget) {
        *start = (s + 1) % n;
        return true;
      }
      send(q.front());
      q.pop_front();
      ++sent;
    }
  }
  return false;
}

// The requests of one call's operations on their way to the send queue, queued every kOps
// operations: a call of many keys takes the queue's lock and wakes the I/O thread once per
// kOps keys, not once per key, while the I/O thread sends the first keys as the call builds
// the later ones. Application threads; one per call.
class SendBatch {
 public:
  static constexpr int kOps = 256;
  SendBatch(WorkerIo* io, int priority) : io_(io), priority_(priority) {}
  // A vector for building one operation's requests before Add, reused from operation to
  // operation (its capacity stays).
  std::vector<OutMsg>& Scratch() { return scratch_; }
  // Adds one operation's requests (moved from).
  void Add(std::vector<OutMsg>& msgs) {
    for (OutMsg& m : msgs) msgs_.push_back(std::move(m));
    if (++ops_ >= kOps) Flush();
  }
  // Runs add(i) for i in [0, n), then queues what was added; when add throws, what was added
  // before is queued (an operation counted as begun must reach the queue) and the error
  // goes on.
  template <typename Add>
  void ForEach(size_t n, Add&& add) {
    try {
      for (size_t i = 0; i < n; ++i) add(i);
    } catch (...) {
      Flush();
      throw;
    }
    Flush();
  }
  void Flush() {
    ops_ = 0;
    if (msgs_.empty()) return;
    io_->Enqueue(msgs_, priority_);
    msgs_.clear();
  }

 private:
  WorkerIo* const io_;
  const int priority_;
  int ops_ = 0;
  std::vector<OutMsg> msgs_;
  std::vector<OutMsg> scratch_;
};

}  // namespace dist
}  // namespace kvstore
