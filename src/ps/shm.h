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
//      sends SHM_OFFER (req_id 0) with "kvshm1 <boot id> <pid> <fd> <bytes> <nonce hex>
//      <chunk bytes>", the last the server's chunk_bytes() for this connection (Chunks).
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
// Chunks (KVSTORE_SHM_CHUNK_BYTES, off by default). A payload of at least two chunks' worth
// (chunk_bytes(), 0: never) is pipelined: the sender reserves ring space for all of it (the
// same room rule as a single payload) and sends it as consecutive messages of the same header and string, each carrying kFlagShm |
// kFlagShmPart and a ShmPart naming the next bytes of the payload, sent as soon as those
// bytes are in the ring; the receiver copies each part into a buffer of its own (Buffer) as
// it arrives, while the sender fills the next, and handles the message once the last part
// is in: the receiver's copy out of the ring overlaps the sender's copy into it instead of
// following it. The assembled payload is not a view of the ring (Message::payload_in_ring
// is false), so a receiver that can keep it as it is (a lone worker's push as the stored
// value, a whole-value reply as the output's storage) saves the copy it would otherwise make
// from the ring, and chunking costs no extra pass there; elsewhere (a round summing several
// workers' pushes, a reply filling part of an output) reading the ring in place is cheaper,
// so each side chunks only towards a peer that keeps whole payloads (worker_io.cc). Parts of
// one payload are never interleaved with other messages of the connection; a part that does
// not continue the payload being assembled (another header or string, a gap, an overlap,
// bytes beyond the payload, a first part while one is assembled) is refused and the assembly
// dropped. The assembly belongs to the link and goes with it (a dead worker's); it is never
// larger than a ring (a sender reserves a whole payload in its ring), so a peer's header
// cannot make the receiver allocate more.
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

// The payload frame of a message with kFlagShm | kFlagShmPart: bytes [at, at + len) of the
// header's payload_len-byte payload (Chunks, above).
struct ShmPart {
  uint64_t offset;  // of the bytes in the sender's ring
  uint64_t len;     // > 0
  uint64_t end;     // the ring's written position after these bytes
  uint64_t at;      // their place in the payload
};
static_assert(sizeof(ShmPart) == 32, "a shared-memory part descriptor is 32 bytes");

// Payloads shorter than this go inline (the descriptor and the bookkeeping cost as much).
constexpr size_t kShmMinBytes = 1024;

// Chunk sizes (Chunks): KVSTORE_SHM_CHUNK_BYTES, read by ShmChunkBytes (0, the default,
// turns chunking off; other values are clamped to [kShmMinChunkBytes, 1 GiB]). Off by
// default: on the 2-vCPU machine, shared with other work, 2 and 4 MiB parts measured no
// faster than whole payloads (docs/perf-log/2026-11-24-shmpipe.md); the overlap they buy
// needs a core idle while the other copies.
constexpr size_t kShmDefaultChunkBytes = 0;
constexpr size_t kShmMinChunkBytes = size_t{64} << 10;
size_t ShmChunkBytes();

class ShmLink {
 public:
  // Worker side: a new segment with two rings of `ring_bytes`. Returns null and the reason
  // when the system refuses (no memfd, no memory).
  // `server_chunk_bytes` goes into the offer: the server's chunk_bytes() once it accepts.
  static std::unique_ptr<ShmLink> Create(size_t ring_bytes, std::string* why, size_t server_chunk_bytes = 0);
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
  // Chunked sends (Chunks, above): Reserve takes the ring space of a whole payload of `n`
  // bytes, or returns false, reserving nothing, where Put would find no room; PutPart then
  // copies the payload's bytes [at, at + len) from `src` into it and describes them in *d,
  // parts in order from at 0 to n.
  struct Reservation {
    uint64_t off = 0;    // of the payload's first byte in the ring
    uint64_t start = 0;  // the written position before that byte
    uint64_t end = 0;    // the written position after the payload
    uint64_t n = 0;
  };
  bool Reserve(size_t n, Reservation* r);
  void PutPart(const Reservation& r, const void* src, size_t at, size_t len, ShmPart* d);
  // Payloads of at least twice this many bytes that this side sends go in parts of this
  // size (0: never). The worker sets its own and names the server's in its offer.
  size_t chunk_bytes() const { return chunk_bytes_; }
  void set_chunk_bytes(size_t n) { chunk_bytes_ = n; }

  // Makes *out a view of the payload `d` names in the incoming ring: no copy; its space is
  // freed when *out (ZeroMQ's free function) and the views before it are gone. False and
  // the reason for a descriptor outside the ring or disagreeing with `len`.
  bool View(const ShmDesc& d, uint64_t len, zmq::message_t* out, std::string* why);
  // The same, copied into a message of its own (the view ended at once).
  bool Take(const ShmDesc& d, uint64_t len, zmq::message_t* out, std::string* why);
  // Copies the part `d` of a payload of `total` bytes to `dst` + d.at (its space is freed
  // once the views before it are gone). False and the reason for a part outside the ring or
  // the payload.
  bool CopyPart(const ShmPart& d, uint64_t total, char* dst, std::string* why);

  // The chunked payload being received (wire.cc RecvMessage drives it): the first part's
  // header and string, the buffer the parts are copied into, and the bytes copied so far.
  struct Assembly {
    bool active = false;
    std::string head, str;
    zmq::message_t buf;
    uint64_t got = 0;
  };
  Assembly& assembly() { return assembly_; }
  // A buffer of `n` bytes (64-byte aligned) for an assembled payload: a message whose bytes
  // go back to this link's pool when it is gone (on any thread, also after the link), so
  // that a payload of a size seen before reuses pages already faulted in.
  zmq::message_t Buffer(size_t n);

  size_t ring_bytes() const { return ring_bytes_; }
  // Payloads this side put into its ring, and those that found no room (sent inline).
  uint64_t puts() const { return puts_; }
  uint64_t misses() const { return misses_; }
  // Of the puts, the payloads sent in parts (Reserve).
  uint64_t chunked() const { return chunked_; }

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
  void ViewRange(uint64_t offset, uint64_t len, uint64_t end, zmq::message_t* out);
  struct Pool;
  static void ReturnBuffer(void* data, void* hint);

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
  uint64_t chunked_ = 0;
  size_t chunk_bytes_ = 0;
  Assembly assembly_;
  std::shared_ptr<Pool> pool_;  // Buffer's recycled buffers (shm.cc)
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
  // Sums of puts(), misses() and chunked() over the links.
  void Counts(uint64_t* puts, uint64_t* misses, uint64_t* chunked = nullptr) const;

 private:
  struct Entry {
    int rank;
    std::unique_ptr<ShmLink> link;
  };
  std::unordered_map<std::string, Entry> links_;
};

}  // namespace dist
}  // namespace kvstore
