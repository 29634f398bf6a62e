// shm.cc - shared-memory payloads between co-located workers and servers (shm.h).
#include "ps/shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <utility>

#include "ps/log.h"

namespace kvstore {
namespace dist {

namespace {

// Header page: magic, nonce, then each ring's consumed position (written by its reader,
// read by its writer) and written position (the other way round), each on a cache line of
// its own. The positions order the bytes between the two processes: the writer publishes
// `written` (release) after copying a payload in, the reader loads it (acquire) before
// copying out and publishes `consumed` (release) after, which the writer loads (acquire)
// before reusing the space. (The message naming the payload also travels after the copy,
// but through ZeroMQ and the kernel, which neither the C++ memory model nor TSan can see.)
constexpr size_t kHeaderBytes = 4096;
constexpr char kMagic[8] = {'K', 'V', 'S', 'H', 'M', '0', '1', '\0'};
constexpr size_t kNonceOffset = 8;
constexpr size_t kNonceBytes = 16;
constexpr size_t kConsumedOffset[2] = {64, 128};
constexpr size_t kWrittenOffset[2] = {192, 256};
constexpr const char* kMemfdName = "kvstore-shm";
// Rings of at most 4 GiB each (offers naming larger segments are refused).
constexpr uint64_t kMaxRingBytes = uint64_t{4} << 30;
constexpr uint64_t kAlign = 64;

std::string Hex(const unsigned char* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}

// This host's boot id (the same in every container of the host), "" when unreadable.
std::string BootId() {
  FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f == nullptr) return "";
  char buf[64] = {0};
  const bool ok = std::fgets(buf, sizeof(buf), f) != nullptr;
  std::fclose(f);
  if (!ok) return "";
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

// The mapping, shared by the link and the views into its incoming ring (shm.h, Lifetime),
// and those views in the order of their payloads: a view's end frees its payload's space
// only once every view before it has ended too, so the consumed position never passes bytes
// still being read.
struct ShmLink::Segment {
  void* base = nullptr;
  size_t bytes = 0;
  uint64_t* consumed = nullptr;  // the incoming ring's consumed position, in the header page
  std::mutex mu;                 // guards the three below (views may end on any thread)
  uint64_t first = 0;            // the sequence number of views.front()
  std::deque<std::pair<uint64_t, bool>> views;  // (its payload's `end`, ended) per view
  uint64_t taken = 0;            // the consumed position published
  Segment(void* b, size_t n) : base(b), bytes(n) {}
  ~Segment() { munmap(base, bytes); }
};

// A view's hold on the segment (ZeroMQ's free-function hint).
struct ShmLink::Lease {
  std::shared_ptr<Segment> seg;
  uint64_t seq;
};

char* ShmLink::Ring(int r) const {
  return static_cast<char*>(base_) + kHeaderBytes + static_cast<size_t>(r) * ring_bytes_;
}

uint64_t* ShmLink::Consumed(int r) const {
  return reinterpret_cast<uint64_t*>(static_cast<char*>(base_) + kConsumedOffset[r]);
}

uint64_t* ShmLink::Written(int r) const {
  return reinterpret_cast<uint64_t*>(static_cast<char*>(base_) + kWrittenOffset[r]);
}

std::unique_ptr<ShmLink> ShmLink::Create(size_t ring_bytes, std::string* why) {
  const uint64_t ring = (static_cast<uint64_t>(ring_bytes) + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
  if (ring == 0 || ring > kMaxRingBytes) {
    *why = "ring size out of range";
    return nullptr;
  }
  const std::string boot = BootId();
  if (boot.empty()) {
    *why = "no boot id";
    return nullptr;
  }
  std::unique_ptr<ShmLink> l(new ShmLink());
  l->ring_bytes_ = static_cast<size_t>(ring);
  l->map_bytes_ = kHeaderBytes + 2 * l->ring_bytes_;
  l->fd_ = memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (l->fd_ < 0) {
    *why = Errno("memfd_create");
    return nullptr;
  }
  if (ftruncate(l->fd_, static_cast<off_t>(l->map_bytes_)) != 0) {
    *why = Errno("ftruncate");
    return nullptr;
  }
  // A fixed size: neither side's mapping can ever extend past the end of the file.
  if (fcntl(l->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *why = Errno("sealing the segment");
    return nullptr;
  }
  void* p = mmap(nullptr, l->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, l->fd_, 0);
  if (p == MAP_FAILED) {
    *why = Errno("mmap");
    return nullptr;
  }
  l->seg_ = std::make_shared<Segment>(p, l->map_bytes_);
  l->base_ = p;
  unsigned char nonce[kNonceBytes];
  if (getrandom(nonce, sizeof(nonce), 0) != static_cast<ssize_t>(sizeof(nonce))) {
    *why = Errno("getrandom");
    return nullptr;
  }
  std::memcpy(l->base_, kMagic, sizeof(kMagic));
  std::memcpy(static_cast<char*>(l->base_) + kNonceOffset, nonce, sizeof(nonce));
  __atomic_store_n(l->Written(0), 0, __ATOMIC_RELEASE);  // the header before the offer
  l->out_ = 0;
  l->seg_->consumed = l->Consumed(1);
  char offer[256];
  std::snprintf(offer, sizeof(offer), "kvshm1 %s %d %d %zu %s", boot.c_str(), static_cast<int>(getpid()),
                l->fd_, l->map_bytes_, Hex(nonce, sizeof(nonce)).c_str());
  l->offer_ = offer;
  return l;
}

std::unique_ptr<ShmLink> ShmLink::Accept(const std::string& offer, std::string* why) {
  char boot[64], nonce_hex[64], tail[2];
  int pid = 0, fd = -1;
  unsigned long long bytes = 0;
  if (offer.size() > 200 ||
      std::sscanf(offer.c_str(), "kvshm1 %63s %d %d %llu %63s %1s", boot, &pid, &fd, &bytes, nonce_hex, tail) != 5 ||
      pid <= 0 || fd < 0 || std::strlen(nonce_hex) != 2 * kNonceBytes) {
    *why = "malformed offer";
    return nullptr;
  }
  unsigned char nonce[kNonceBytes];
  for (size_t i = 0; i < kNonceBytes; ++i) {
    unsigned v = 0;
    if (std::sscanf(nonce_hex + 2 * i, "%2x", &v) != 1) {
      *why = "malformed offer";
      return nullptr;
    }
    nonce[i] = static_cast<unsigned char>(v);
  }
  const uint64_t ring = bytes >= kHeaderBytes ? (bytes - kHeaderBytes) / 2 : 0;
  if (ring == 0 || ring % kHeaderBytes != 0 || ring > kMaxRingBytes || kHeaderBytes + 2 * ring != bytes) {
    *why = "segment size out of range";
    return nullptr;
  }
  if (BootId() != boot) {
    *why = "the worker runs on another host";
    return nullptr;
  }
  // Only a kvstore memfd is ever opened (opening some other file could have side effects).
  char path[64], target[256];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  const ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n < 0) {
    *why = Errno("the worker's segment is not visible here");
    return nullptr;
  }
  target[n] = '\0';
  const std::string prefix = std::string("/memfd:") + kMemfdName;
  if (std::strncmp(target, prefix.c_str(), prefix.size()) != 0) {
    *why = "the offer names something other than a kvstore segment";
    return nullptr;
  }
  const int sfd = open(path, O_RDWR | O_CLOEXEC);
  if (sfd < 0) {
    *why = Errno("opening the worker's segment");
    return nullptr;
  }
  std::unique_ptr<ShmLink> l(new ShmLink());
  struct stat st;
  const int seals = fcntl(sfd, F_GET_SEALS);
  const int need = F_SEAL_SHRINK | F_SEAL_GROW;
  if (fstat(sfd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      static_cast<uint64_t>(st.st_size) != bytes || seals < 0 || (seals & need) != need) {
    close(sfd);
    *why = "the segment's owner, size or seals do not check";
    return nullptr;
  }
  void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
  close(sfd);
  if (p == MAP_FAILED) {
    *why = Errno("mmap");
    return nullptr;
  }
  l->seg_ = std::make_shared<Segment>(p, static_cast<size_t>(bytes));
  l->base_ = p;
  l->map_bytes_ = static_cast<size_t>(bytes);
  l->ring_bytes_ = static_cast<size_t>(ring);
  const char* b = static_cast<const char*>(p);
  (void)__atomic_load_n(l->Written(0), __ATOMIC_ACQUIRE);  // pairs with Create's release
  if (std::memcmp(b, kMagic, sizeof(kMagic)) != 0 || std::memcmp(b + kNonceOffset, nonce, kNonceBytes) != 0) {
    *why = "the segment's nonce differs from the offer";
    return nullptr;
  }
  l->out_ = 1;
  l->seg_->consumed = l->Consumed(0);
  l->sending_ = true;
  return l;
}

ShmLink::~ShmLink() {
  if (fd_ >= 0) close(fd_);
}

void ShmLink::Answered(bool accepted) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  sending_ = accepted;
}

bool ShmLink::Refresh() {
  const uint64_t c = __atomic_load_n(Consumed(out_), __ATOMIC_ACQUIRE);
  if (c > written_) {
    // Only a broken or hostile peer publishes this; stop using the ring for it.
    Log("shared memory: the peer's consumed position %" PRIu64 " is beyond the written %" PRIu64
        "; its payloads go over TCP from now on", c, written_);
    sending_ = false;
    return false;
  }
  // (A position below the last one seen is the peer's lag behind a restart below, or a lie
  // that only makes this side wait: neither frees anything.)
  freed_ = std::max(freed_, c);
  // An empty ring starts again at its beginning: payloads keep to the pages they touched
  // before (a ring's pages are faulted in on first use and stay), instead of walking the
  // whole ring, which faults every page of it in once per ring's worth of traffic and keeps
  // it all resident. The skipped tail holds nothing the reader has not read.
  if (freed_ == written_ && written_ % ring_bytes_ != 0) {
    written_ += ring_bytes_ - written_ % ring_bytes_;
    freed_ = written_;
  }
  return true;
}

bool ShmLink::Room(size_t n, uint64_t* off, uint64_t* need) const {
  const uint64_t pos = written_ % ring_bytes_;
  const uint64_t skip = pos + n > ring_bytes_ ? ring_bytes_ - pos : 0;  // payloads are contiguous
  const uint64_t aligned = (n + kAlign - 1) / kAlign * kAlign;
  *off = skip > 0 ? 0 : pos;
  *need = skip + aligned;
  // The bytes in use span [freed_, written_) of the ring's history, at most one ring; an
  // empty ring also takes a payload that has to skip its end (the skipped bytes hold
  // nothing), so any payload up to a ring's size fits once the reader caught up.
  const uint64_t used = written_ - freed_;
  return used + *need <= ring_bytes_ || (used == 0 && aligned <= ring_bytes_);
}

bool ShmLink::MustWait(size_t n) {
  if (!sending_ || n < kShmMinBytes || n > ring_bytes_ || !Refresh()) return false;
  uint64_t off, need;
  return !Room(n, &off, &need);
}

bool ShmLink::Put(const void* src, size_t n, ShmDesc* d) {
  if (!sending_ || n == 0) return false;
  if (n > ring_bytes_) {
    ++misses_;
    return false;
  }
  if (!Refresh()) return false;
  uint64_t off, need;
  if (!Room(n, &off, &need)) {
    ++misses_;
    return false;
  }
  ++puts_;
  std::memcpy(Ring(out_) + off, src, n);
  written_ += need;
  d->offset = off;
  d->len = n;
  d->end = written_;
  __atomic_store_n(Written(out_), written_, __ATOMIC_RELEASE);
  return true;
}

bool ShmLink::View(const ShmDesc& d, uint64_t len, zmq::message_t* out, std::string* why) {
  if (d.len != len || d.len == 0) {
    *why = "shared-memory descriptor length differs from the header";
    return false;
  }
  if (d.offset > ring_bytes_ || d.len > ring_bytes_ - d.offset) {
    *why = "shared-memory descriptor outside the ring";
    return false;
  }
  // Pairs with the writer's release of a position at or past d.end (the value itself is
  // the peer's word, like the descriptor: only the bounds above protect this process).
  (void)__atomic_load_n(Written(1 - out_), __ATOMIC_ACQUIRE);
  // The lease exists before its entry does: an entry with no lease would never end, and the
  // consumed position would never pass it.
  std::unique_ptr<Lease> owned(new Lease{seg_, 0});
  {
    std::lock_guard<std::mutex> lock(seg_->mu);
    owned->seq = seg_->first + seg_->views.size();
    seg_->views.emplace_back(d.end, false);
  }
  Lease* lease = owned.release();
  try {
    zmq::message_t m(Ring(1 - out_) + d.offset, static_cast<size_t>(d.len), &ShmLink::EndView, lease);
    *out = std::move(m);
  } catch (...) {
    EndView(nullptr, lease);
    throw;
  }
  return true;
}

bool ShmLink::Take(const ShmDesc& d, uint64_t len, zmq::message_t* out, std::string* why) {
  zmq::message_t view;
  if (!View(d, len, &view, why)) return false;
  zmq::message_t copy(view.data(), view.size());
  *out = std::move(copy);
  return true;
}

// Marks a view ended and publishes the consumed position past the payloads whose views,
// and all before them, have ended.
void ShmLink::EndView(void* /*data*/, void* hint) {
  std::unique_ptr<Lease> l(static_cast<Lease*>(hint));
  Segment& s = *l->seg;
  std::lock_guard<std::mutex> lock(s.mu);  // released before `l` (and maybe the segment) goes
  s.views[static_cast<size_t>(l->seq - s.first)].second = true;
  uint64_t taken = s.taken;
  while (!s.views.empty() && s.views.front().second) {
    taken = std::max(taken, s.views.front().first);
    s.views.pop_front();
    ++s.first;
  }
  if (taken > s.taken) {
    s.taken = taken;
    __atomic_store_n(s.consumed, taken, __ATOMIC_RELEASE);
  }
}

void ShmPeers::Counts(uint64_t* puts, uint64_t* misses) const {
  *puts = *misses = 0;
  for (const auto& e : links_) {
    *puts += e.second.link->puts();
    *misses += e.second.link->misses();
  }
}

void ShmPeers::RemoveRank(int rank) {
  for (auto it = links_.begin(); it != links_.end();) {
    if (it->second.rank == rank) {
      it = links_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace dist
}  // namespace kvstore
