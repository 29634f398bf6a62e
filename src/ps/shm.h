// shm.h - value payloads between a worker and a server on the same host, through a shared
// memory segment instead of the TCP connection.
//
// Segment. A worker makes one segment per server: a sealed memfd (fixed size: it can neither
// shrink nor grow, so no access to a mapping can fault) holding a header page and two rings
// of `ring_bytes` each: ring 0 carries the worker's payloads to the server, ring 1 the
// server's to the worker. A memfd has no name: nothing is ever left in /dev/shm, and the
// memory goes when the last of the two processes unmaps it or exits, however it ends.
//
// Handshake (over the authenticated ZeroMQ connection, transport.h):
//   1. The worker creates the segment, writes a random 16-byte nonce into its header and
//      sends SHM_OFFER (req_id 0) with "kvshm1 <boot id> <pid> <fd> <bytes> <nonce hex>".
//   2. The server checks that the boot id is its host's, that /proc/<pid>/fd/<fd> is a
//      kvstore memfd, opens it (the kernel allows that only to the worker's own user,
//      ptrace rules), checks owner, size and seals, maps it, checks the nonce and closes the
//      descriptor; it then answers REPLY (req_id 0) with status 0, or an error and the
//      reason. Any failure just means this connection stays on TCP.
//   3. The worker closes its descriptor on either answer and, after status 0, sends
//      payloads through the segment. The server sends its payloads through it from step 2
//      on (the worker reads its own mapping, which exists from step 1).
//
// Data. A payload is copied into the sender's ring and the message carries, instead of the
// payload frame, a ShmDesc (kFlagShm, wire.h): where the bytes are and how far the ring has
// been written. The receiver checks the range against the ring (a descriptor naming bytes
// outside it is refused like any malformed message) and reads the bytes where they are (View:
// a ZeroMQ message over the ring, no copy); when the last such view of a payload is gone it
// publishes `end` as the ring's consumed position. Messages of one connection arrive in
// order and views may end in any order, so the consumed position moves forward only over
// payloads whose views, and those of every payload before them, are all gone: a slot is
// never reused while anything reads it. Receivers read a view while handling its message
// and copy out what they keep (wire.h Message::payload_in_ring), so the ring drains as
// messages are handled and a sender never waits on a value kept for later. A payload that does not
// fit in the free part of the ring travels inline over TCP: nothing ever waits for ring
// space, and a peer that stops reading (dead, hung) only turns its connection back into a
// TCP one.
//
// Trust. The peer is a job member (it got past CURVE when the job has a secret); its
// segment contents are data, never trusted for control: offsets from messages are bounds-
// checked, the consumed position the peer publishes is checked before use (a value beyond the
// written position turns the ring off; one below the last seen frees nothing), and the sizes come
// from the handshake and fstat, never re-read from the header. SECURITY.md has the threat
// model.
//
// Lifetime. The mapping lives as long as the link or any view into it: a view that outlives
// its link (a dead worker's segment, unmapped by RemoveRank) still reads mapped memory.
//
// Threading. A link is used by the one thread that owns the socket it belongs to; a view
// may end on any thread (its release takes the ring's own lock).
#pragma once

#include <zmq.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

namespace kvstore {
namespace dist {

// The payload frame of a message with kFlagShm.
struct ShmDesc {
  uint64_t offset;  // of the bytes in the sender's ring
  uint64_t len;     // equals the header's payload_len
  uint64_t end;     // the ring's written position (bytes since creation) after this payload
};
static_assert(sizeof(ShmDesc) == 24, "a shared-memory descriptor is 24 bytes");

// Payloads shorter than this go inline (the descriptor and the bookkeeping cost as much).
constexpr size_t kShmMinBytes = 1024;

class ShmLink {
 public:
  // Worker side: a new segment with two rings of `ring_bytes`. Returns null and the reason
  // when the system refuses (no memfd, no memory).
  static std::unique_ptr<ShmLink> Create(size_t ring_bytes, std::string* why);
  // Server side: maps the segment an offer names (handshake step 2). Null and the reason
  // when the offer is malformed, names another host or process, or anything does not check.
  static std::unique_ptr<ShmLink> Accept(const std::string& offer, std::string* why);
  ~ShmLink();
  ShmLink(const ShmLink&) = delete;
  ShmLink& operator=(const ShmLink&) = delete;

  // The SHM_OFFER text of a created link.
  const std::string& offer() const { return offer_; }
  // Worker side: the server's answer to the offer. Closes the descriptor; payloads go
  // through the segment from now on iff `accepted`.
  void Answered(bool accepted);
  bool sending() const { return sending_; }

  // Copies `n` bytes to the outgoing ring and describes them in *d. False, with nothing
  // written, when the link does not send or the ring lacks room: send inline.
  bool Put(const void* src, size_t n, ShmDesc* d);
  // Whether a payload of `n` bytes would go through the ring, but the ring has no room for
  // it now (the reader has not caught up): a sender that can hold the message back (the
  // worker) does so instead of sending it inline.
  bool MustWait(size_t n);
  // Makes *out a view of the payload `d` names in the incoming ring: no copy; its space is
  // freed when *out (ZeroMQ's free function) and the views before it are gone. False and
  // the reason for a descriptor outside the ring or disagreeing with `len`.
  bool View(const ShmDesc& d, uint64_t len, zmq::message_t* out, std::string* why);
  // The same, copied into a message of its own (the view ended at once).
  bool Take(const ShmDesc& d, uint64_t len, zmq::message_t* out, std::string* why);

  size_t ring_bytes() const { return ring_bytes_; }
  // Payloads this side put into its ring, and those that found no room (sent inline).
  uint64_t puts() const { return puts_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Segment;
  struct Lease;
  static void EndView(void* data, void* hint);
  ShmLink() = default;
  char* Ring(int r) const;
  uint64_t* Consumed(int r) const;
  uint64_t* Written(int r) const;
  // Reads the reader's position; false (and the ring off) when it is not credible.
  bool Refresh();
  // Where `n` bytes would go, and the ring space they take; false without room.
  bool Room(size_t n, uint64_t* off, uint64_t* need) const;

  std::shared_ptr<Segment> seg_;  // the mapping and the incoming ring's views (shm.cc)
  void* base_ = nullptr;          // seg_'s mapping
  size_t map_bytes_ = 0;
  size_t ring_bytes_ = 0;
  int fd_ = -1;             // worker side until the answer
  int out_ = 0;             // the ring this side writes: 0 worker, 1 server
  bool sending_ = false;
  uint64_t written_ = 0;    // of the outgoing ring (bytes since creation)
  uint64_t freed_ = 0;      // the peer's consumed position of it, the highest seen (or the
                            // restart point of an empty ring: Refresh)
  uint64_t puts_ = 0;
  uint64_t misses_ = 0;
  std::string offer_;
};

// The links of one socket: by routing id on a server's ROUTER, under "" on a worker's
// DEALER to a server.
class ShmPeers {
 public:
  ShmLink* Find(const std::string& routing_id) const {
    if (links_.empty()) return nullptr;
    auto it = links_.find(routing_id);
    return it == links_.end() ? nullptr : it->second.link.get();
  }
  bool Add(const std::string& routing_id, int rank, std::unique_ptr<ShmLink> link) {
    return links_.emplace(routing_id, Entry{rank, std::move(link)}).second;
  }
  void Remove(const std::string& routing_id) { links_.erase(routing_id); }
  // Unmaps the segments of peer `rank` (a dead worker's).
  void RemoveRank(int rank);
  size_t size() const { return links_.size(); }
  // Sums of puts() and misses() over the links.
  void Counts(uint64_t* puts, uint64_t* misses) const;

 private:
  struct Entry {
    int rank;
    std::unique_ptr<ShmLink> link;
  };
  std::unordered_map<std::string, Entry> links_;
};

}  // namespace dist
}  // namespace kvstore
