// Unit test of the shared-memory payload path (src/ps/shm.h, kFlagShm in wire.h), in one
// process: a worker's segment accepted by a "server" link through /proc/self/fd; payloads
// of every size class (odd ones, one byte short of a ring, a ring's worth) round trip both
// ways, wrap around, and fail over to inline when the ring is full; offers that do not check
// are refused with a reason and map nothing; descriptors naming bytes outside the ring, or a
// length other than the header's, are refused by Take and by RecvMessage; views of the ring
// (zero-copy receive) free their space in order, whatever order they end in; a consumed
// position beyond the written one turns the producer's ring off; an empty ring starts again
// at its beginning (its pages stay the ones touched before); nothing is left in
// /dev/shm. The worker's held requests (SendHeldSlice) leave at most a slice per turn. A view
// whose making fails for want of memory (the program's operator new fails on request) leaves
// no entry behind that would keep the ring's space from being freed.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <zmq.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "ps/shm.h"
#include "ps/wire.h"
#include "ps/worker_io.h"
#include "../common/check.h"
#include "../common/failing_new.h"

using kvstore::dist::kFlagShm;
using kvstore::dist::Message;
using kvstore::dist::MsgType;
using kvstore::dist::OutPayload;
using kvstore::dist::Role;
using kvstore::dist::SharedBuf;
using kvstore::dist::ShmDesc;
using kvstore::dist::ShmLink;
using kvstore::dist::ShmPeers;
using kvstore::dist::WireHeader;

namespace {

constexpr size_t kRing = 1 << 20;

std::vector<char> Pattern(size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return v;
}

// Copies `n` bytes from `from` to `to` through the ring; false when Put found no room.
bool RoundTrip(ShmLink* from, ShmLink* to, size_t n, unsigned seed) {
  const std::vector<char> src = Pattern(n, seed);
  ShmDesc d;
  if (!from->Put(src.data(), n, &d)) return false;
  zmq::message_t out;
  std::string why;
  CHECK_MSG(to->Take(d, n, &out, &why), "take of %zu bytes: %s", n, why.c_str());
  CHECK_MSG(out.size() == n && std::memcmp(out.data(), src.data(), n) == 0, "payload of %zu bytes differs", n);
  return true;
}

std::string Field(const std::string& offer, int i) {
  size_t p = 0;
  for (int k = 0; k < i; ++k) p = offer.find(' ', p) + 1;
  return offer.substr(p, offer.find(' ', p) - p);
}

std::string WithField(const std::string& offer, int i, const std::string& v) {
  size_t p = 0;
  for (int k = 0; k < i; ++k) p = offer.find(' ', p) + 1;
  const size_t q = offer.find(' ', p);
  return offer.substr(0, p) + v + (q == std::string::npos ? "" : offer.substr(q));
}

int CountKvstoreShm() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += std::strstr(e->d_name, "kvstore") != nullptr;
    closedir(d);
  }
  return n;
}

// A worker's link `w` and the server's link `s` that accepted its offer, answered as the
// server's reply does: both rings are in use.
void Connect(std::unique_ptr<ShmLink>* w, std::unique_ptr<ShmLink>* s) {
  std::string why;
  *w = ShmLink::Create(kRing, &why);
  REQUIRE(*w != nullptr, "%s", why.c_str());
  *s = ShmLink::Accept((*w)->offer(), &why);
  REQUIRE(*s != nullptr, "%s", why.c_str());
  (*w)->Answered(true);
}

void TestRoundTrips() {
  std::string why;
  std::unique_ptr<ShmLink> w = ShmLink::Create(kRing, &why);
  REQUIRE(w != nullptr, "%s", why.c_str());
  CHECK(!w->sending());  // not before the server's answer
  std::unique_ptr<ShmLink> s = ShmLink::Accept(w->offer(), &why);
  CHECK_MSG(s != nullptr, "accept: %s", why.c_str());
  if (!s) return;
  CHECK(s->sending());
  ShmDesc d;
  const char byte = 1;
  CHECK(!w->Put(&byte, 1, &d));  // not accepted yet: inline
  w->Answered(true);
  CHECK(w->sending());
  // Every size class, both directions, many times over so that the rings wrap.
  const size_t sizes[] = {1, 3, 63, 64, 65, 4095, 4097, 12345, 65536 + 7, kRing / 3, kRing / 2 + 1, kRing - 64, kRing};
  unsigned seed = 0;
  for (int round = 0; round < 5; ++round) {
    for (size_t n : sizes) {
      CHECK_MSG(RoundTrip(w.get(), s.get(), n, ++seed), "worker -> server, %zu bytes found no room", n);
      CHECK_MSG(RoundTrip(s.get(), w.get(), n, ++seed), "server -> worker, %zu bytes found no room", n);
    }
  }
  CHECK(!w->Put(&byte, 0, &d));  // nothing to put
  std::vector<char> big(kRing + 1, 0);
  CHECK(!w->Put(big.data(), big.size(), &d));  // larger than the ring: inline
}

// A full ring: Put refuses (the payload goes inline) until the reader takes what is there.
void TestFullRing() {
  std::string why;
  std::unique_ptr<ShmLink> w, s;
  Connect(&w, &s);
  ShmDesc d;
  std::vector<ShmDesc> pending;
  const std::vector<char> quarter = Pattern(kRing / 4, 9);
  while (pending.size() < 10 && w->Put(quarter.data(), quarter.size(), &d)) pending.push_back(d);
  CHECK(pending.size() == 4);
  CHECK(w->misses() == 1 && w->puts() == 4);
  zmq::message_t out;
  CHECK(s->Take(pending[0], pending[0].len, &out, &why));
  CHECK(w->Put(quarter.data(), quarter.size(), &d));  // a quarter free again
  pending.push_back(d);
  CHECK(!w->Put(quarter.data(), quarter.size(), &d));
  for (size_t i = 1; i < pending.size(); ++i) {
    CHECK(s->Take(pending[i], pending[i].len, &out, &why) &&
          std::memcmp(out.data(), quarter.data(), quarter.size()) == 0);
  }
  // Empty again: a whole ring's payload fits.
  CHECK(RoundTrip(w.get(), s.get(), kRing, 1));
}

// Zero-copy receive (View): a view reads the bytes in the ring itself; its payload's space
// is freed only when it and every view before it have ended, in whatever order they end (a
// later view ending first frees nothing: the writer still finds the ring full); a view that
// outlives its link still reads the mapped bytes; Take's copy frees at once.
void TestViews() {
  std::string why;
  std::unique_ptr<ShmLink> w, s;
  Connect(&w, &s);
  const std::vector<char> a = Pattern(kRing / 2, 1), b = Pattern(kRing / 2, 2);
  ShmDesc da, db, d;
  CHECK(w->Put(a.data(), a.size(), &da) && w->Put(b.data(), b.size(), &db));
  CHECK(w->MustWait(4096));  // full
  auto va = std::make_unique<zmq::message_t>();
  auto vb = std::make_unique<zmq::message_t>();
  CHECK(s->View(da, da.len, va.get(), &why) && s->View(db, db.len, vb.get(), &why));
  CHECK(std::memcmp(va->data(), a.data(), a.size()) == 0 && std::memcmp(vb->data(), b.data(), b.size()) == 0);
  vb.reset();                // the later view ends first: nothing is freed
  CHECK(w->MustWait(4096));
  CHECK(std::memcmp(va->data(), a.data(), a.size()) == 0);
  zmq::message_t moved(std::move(*va));  // a moved view still holds its payload
  va.reset();
  CHECK(w->MustWait(4096) && std::memcmp(moved.data(), a.data(), a.size()) == 0);
  moved.rebuild(0);          // both ended: the whole ring is free
  CHECK(!w->MustWait(kRing) && w->Put(a.data(), a.size(), &d) && d.offset == 0);
  // A view outliving the link (a dead worker's segment unmapped by RemoveRank) reads mapped
  // memory, and ending it afterwards is harmless.
  zmq::message_t orphan;
  CHECK(s->View(d, d.len, &orphan, &why));
  s.reset();
  CHECK(std::memcmp(orphan.data(), a.data(), a.size()) == 0);
  orphan.rebuild(0);
}

// Each allocation View makes fails in turn: the view is not made, and once a later payload's
// view ends, the whole ring is free again (the failed view left no entry that would hold the
// consumed position back).
void TestViewsWithoutMemory() {
  std::string why;
  std::unique_ptr<ShmLink> w, s;
  Connect(&w, &s);
  const std::vector<char> a = Pattern(kRing / 4, 3);
  for (long fail_at = 1;; ++fail_at) {
    ShmDesc first, second;
    REQUIRE(w->Put(a.data(), a.size(), &first) && w->Put(a.data(), a.size(), &second), "put %ld", fail_at);
    zmq::message_t view, next;
    bool made = false;
        FailNthAllocation(fail_at);
    try {
      made = s->View(first, first.len, &view, &why);
    } catch (const std::bad_alloc&) {
    }
    StopFailingAllocations();
    CHECK(s->View(second, second.len, &next, &why));
    view.rebuild(0);
    next.rebuild(0);
    CHECK_MSG(!w->MustWait(kRing), "allocation %ld of a view failed: the ring stays in use", fail_at);
    if (made || fail_at > 100) {
      CHECK_MSG(made && fail_at > 1, "a view needs %ld allocations", fail_at);
      break;
    }
  }
}

// Payloads that find the ring empty go to its beginning, so a link that carries one payload
// at a time touches only its first pages (they are faulted in once and stay); the reader's
// position, which lags behind such a restart, is not taken for a broken peer.
void TestRestart() {
  std::string why;
  std::unique_ptr<ShmLink> w, s;
  Connect(&w, &s);
  zmq::message_t out;
  ShmDesc d;
  for (int i = 0; i < 20; ++i) {
    const std::vector<char> v = Pattern(4097 + static_cast<size_t>(i), static_cast<unsigned>(i));
    CHECK(w->Put(v.data(), v.size(), &d));
    CHECK_MSG(d.offset == 0, "payload %d of a drained ring at offset %llu", i, static_cast<unsigned long long>(d.offset));
    CHECK(s->Take(d, d.len, &out, &why) && std::memcmp(out.data(), v.data(), v.size()) == 0);
  }
  // B restarts the ring; C is put before the reader takes B (its published position is
  // still A's end, below the restart point).
  const std::vector<char> b = Pattern(5000, 1), c = Pattern(7000, 2);
  ShmDesc db, dc;
  CHECK(w->Put(b.data(), b.size(), &db) && db.offset == 0);
  CHECK(w->Put(c.data(), c.size(), &dc) && dc.offset >= b.size());
  CHECK(w->sending());
  CHECK(s->Take(db, db.len, &out, &why) && std::memcmp(out.data(), b.data(), b.size()) == 0);
  CHECK(s->Take(dc, dc.len, &out, &why) && std::memcmp(out.data(), c.data(), c.size()) == 0);
  CHECK(w->Put(b.data(), b.size(), &db) && db.offset == 0 && w->sending());
}

void TestRefusedDescriptors() {
  std::string why;
  std::unique_ptr<ShmLink> w, s;
  Connect(&w, &s);
  zmq::message_t out;
  const ShmDesc bad[] = {
      {kRing, 1, 64},                     // starts at the end
      {kRing - 8, 16, 64},                // runs past the end
      {0, kRing + 1, 64},                 // longer than the ring
      {~uint64_t{0} - 3, 8, 64},          // offset + len overflows
      {8, ~uint64_t{0}, 64},              // so does this
  };
  for (const ShmDesc& d : bad) {
    why.clear();
    CHECK_MSG(!s->Take(d, d.len, &out, &why) && why.find("outside the ring") != std::string::npos,
              "descriptor at %llu+%llu accepted (%s)", static_cast<unsigned long long>(d.offset),
              static_cast<unsigned long long>(d.len), why.c_str());
  }
  ShmDesc d{0, 100, 128};
  CHECK(!s->Take(d, 99, &out, &why) && why.find("length") != std::string::npos);
  d.len = 0;
  CHECK(!s->Take(d, 0, &out, &why));
  // A consumed position beyond what was written (a broken or hostile reader): the writer
  // stops using the ring instead of overwriting bytes it cannot know are read.
  const std::vector<char> v = Pattern(1000, 3);
  CHECK(w->Put(v.data(), v.size(), &d));
  ShmDesc lie = d;
  lie.end = d.end + (1u << 30);
  CHECK(s->Take(lie, lie.len, &out, &why));  // the reader publishes lie.end
  CHECK(!w->Put(v.data(), v.size(), &d));
  CHECK(!w->sending());
}

void TestRefusedOffers() {
  std::string why;
  std::unique_ptr<ShmLink> w = ShmLink::Create(kRing, &why);
  REQUIRE(w != nullptr, "%s", why.c_str());
  const std::string offer = w->offer();
  CHECK(Field(offer, 0) == "kvshm1");
  auto refused = [&](const std::string& o, const char* reason) {
    why.clear();
    const bool r = ShmLink::Accept(o, &why) == nullptr && why.find(reason) != std::string::npos;
    CHECK_MSG(r, "offer '%s' not refused for '%s' (%s)", o.c_str(), reason, why.c_str());
  };
  refused("", "malformed");
  refused("kvshm2" + offer.substr(6), "malformed");
  refused(offer + " extra", "malformed");
  refused(WithField(offer, 2, "-1"), "malformed");
  refused(WithField(offer, 3, "x"), "malformed");
  refused(WithField(offer, 5, "00"), "malformed");
  refused(WithField(offer, 5, std::string(32, 'z')), "malformed");
  refused(WithField(offer, 1, "00000000-0000-0000-0000-000000000000"), "another host");
  refused(WithField(offer, 4, "4096"), "size out of range");
  refused(WithField(offer, 4, std::to_string(std::stoull(Field(offer, 4)) + 4096)), "size out of range");
  refused(WithField(offer, 4, std::to_string(std::stoull(Field(offer, 4)) + 8192 * 2)), "do not check");
  refused(WithField(offer, 5, std::string(32, '0')), "nonce");
  // A descriptor of this process that is not a kvstore memfd, and one that is closed.
  const int other = open("/dev/null", O_RDONLY | O_CLOEXEC);
  refused(WithField(offer, 3, std::to_string(other)), "something other");
  close(other);
  refused(WithField(offer, 3, std::to_string(other)), "not visible");
  // Another process's number (pid 1 is never this test).
  refused(WithField(offer, 2, "1"), "");
  // The real offer still works; once answered, the worker's descriptor is closed and the
  // offer names nothing any more.
  CHECK(ShmLink::Accept(offer, &why) != nullptr);
  w->Answered(false);
  CHECK(!w->sending());
  refused(offer, "not visible");
}

// The same through the wire: a descriptor frame replaces the payload, RecvMessage takes the
// bytes from the link of the socket and clears the flag; refused without a link, with a
// frame of the wrong size, or naming bytes outside the ring.
void TestWire() {
  zmq::context_t ctx;
  zmq::socket_t tx(ctx, zmq::socket_type::pair), rx(ctx, zmq::socket_type::pair);
  rx.bind("inproc://shm");
  tx.connect("inproc://shm");
  std::string why;
  ShmPeers wp, sp;
  std::unique_ptr<ShmLink> w, s;
  Connect(&w, &s);
  wp.Add("", 0, std::move(w));
  sp.Add("", 0, std::move(s));
  auto recv = [&](ShmPeers* peers, Message* m, bool* ok) {
    zmq::pollitem_t it{static_cast<void*>(rx), 0, ZMQ_POLLIN, 0};
    zmq::poll(&it, 1, std::chrono::milliseconds(2000));
    why.clear();
    return kvstore::dist::RecvMessage(rx, false, m, ok, &why, peers);
  };
  for (size_t n : {size_t{1}, size_t{1023}, size_t{1024}, size_t{4099}, size_t{300001}}) {
    const size_t count = n;  // uint8 elements
    auto buf = std::make_shared<SharedBuf>();
    const std::vector<char> v = Pattern(n, static_cast<unsigned>(n));
    buf->msg.rebuild(v.data(), v.size());
    WireHeader h = kvstore::dist::MakeHeader(MsgType::kPush, Role::kWorker, 0);
    h.key = 3;
    h.dtype = KV_UINT8;
    h.total = h.count = static_cast<int64_t>(count);
    REQUIRE(kvstore::dist::SendMessage(tx, nullptr, h, "", OutPayload{buf, 0, n}, &wp), "send");
    Message m;
    bool ok = false;
    CHECK(recv(&sp, &m, &ok) && ok);
    CHECK_MSG(m.payload.size() == n && std::memcmp(m.payload.data(), v.data(), n) == 0, "%zu bytes differ", n);
    CHECK((m.h.flags & kFlagShm) == 0);
  }
  uint64_t puts = 0, misses = 0;
  wp.Counts(&puts, &misses);
  CHECK(puts == 3 && misses == 0);  // 1 and 1023 bytes went inline (kShmMinBytes)
  // Hand-made descriptor frames.
  auto send_desc = [&](const void* frame, size_t frame_bytes, uint64_t len) {
    WireHeader h = kvstore::dist::MakeHeader(MsgType::kPush, Role::kWorker, 0);
    h.key = 3;
    h.dtype = KV_UINT8;
    h.total = h.count = static_cast<int64_t>(len);
    h.flags = kFlagShm;
    h.payload_len = len;
    h.num_frames = 2;
    tx.send(zmq::const_buffer(&h, sizeof(h)), zmq::send_flags::sndmore);
    tx.send(zmq::const_buffer(frame, frame_bytes), zmq::send_flags::none);
  };
  const ShmDesc outside{kRing - 10, 100, 4096};
  const ShmDesc inside{0, 100, 4096};
  struct Case {
    const void* frame;
    size_t bytes;
    ShmPeers* peers;
    const char* reason;
  } cases[] = {
      {&outside, sizeof(ShmDesc), &sp, "outside the ring"},
      {&inside, sizeof(ShmDesc) - 1, &sp, "descriptor frame of 23 bytes"},
      {&inside, sizeof(ShmDesc), nullptr, "without a segment"},
  };
  for (const Case& c : cases) {
    send_desc(c.frame, c.bytes, 100);
    Message m;
    bool ok = true;
    CHECK(recv(c.peers, &m, &ok));
    CHECK_MSG(!ok && why.find(c.reason) != std::string::npos, "refusal '%s' expected, got '%s'", c.reason, why.c_str());
  }
  // A shared-memory flag on a message without a payload is refused by the header's rules.
  WireHeader h = kvstore::dist::MakeHeader(MsgType::kPull, Role::kWorker, 0);
  h.key = 3;
  h.dtype = KV_UINT8;
  h.total = h.count = 10;
  h.flags = kFlagShm;
  h.num_frames = 1;
  CHECK(kvstore::dist::ValidateHeader(h, 0, 0, 0).find("shared-memory") != std::string::npos);
}

// The worker's held requests (worker_io.h SendHeldSlice): a ring that came free under
// thousands of held requests sends them a slice per turn of the I/O loop, never all in one
// (the loop's heartbeat waits for the turn), and reports that more may leave; servers take
// turns going first; completed requests are dropped unsent; a server whose ring has no room
// keeps its requests, in order, while the others' leave.
void TestHeldSlices() {
  struct Item {
    int server;
    int seq;
    bool completed;
  };
  constexpr int kBudget = 1024, kPerServer = 3000;
  std::vector<std::deque<Item>> held(3);
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < kPerServer; ++i) held[static_cast<size_t>(s)].push_back(Item{s, i, i % 10 == 9});
  }
  int room2 = 0;  // server 2's ring takes this many more requests
  std::vector<std::vector<int>> sent(3);
  std::vector<int> order;  // the server of every send
  size_t start = 0;
  auto turn = [&](int* n) {
    *n = 0;
    return kvstore::dist::SendHeldSlice(
        held, &start, kBudget, [](const Item& it) { return it.completed; },
        [&](const Item& it) { return it.server == 2 && room2 == 0; },
        [&](Item& it) {
          ++*n;
          if (it.server == 2) --room2;
          sent[static_cast<size_t>(it.server)].push_back(it.seq);
          order.push_back(it.server);
        });
  };
  int n = 0, turns = 0;
  for (;;) {
    const bool more = turn(&n);
    ++turns;
    CHECK_MSG(n <= kBudget, "a turn sent %d held requests (slice %d)", n, kBudget);
    if (!more) break;
    CHECK_MSG(n == kBudget, "a turn that reports more sent %d, not the slice", n);
    REQUIRE(turns < 100, "held requests never drained");
  }
  const int live = kPerServer - kPerServer / 10;  // every tenth was completed meanwhile
  CHECK_MSG(static_cast<int>(sent[0].size()) == live && static_cast<int>(sent[1].size()) == live,
            "sent %zu and %zu of %d", sent[0].size(), sent[1].size(), live);
  CHECK_MSG(turns >= 2 * live / kBudget, "%d turns for %d requests", turns, 2 * live);
  CHECK(sent[2].empty() && held[2].size() == static_cast<size_t>(kPerServer));  // no room
  for (size_t s = 0; s < 2; ++s) {
    for (size_t i = 1; i < sent[s].size(); ++i) CHECK(sent[s][i] > sent[s][i - 1] && sent[s][i] % 10 != 9);
  }
  // Server 0 went first; server 1 sent before server 0 was drained.
  const auto first1 = std::find(order.begin(), order.end(), 1);
  const auto last0 = std::find(order.rbegin(), order.rend(), 0);
  CHECK(!order.empty() && order[0] == 0 && first1 != order.end() && last0 != order.rend() &&
        first1 < last0.base());
  CHECK(held[0].empty() && held[1].empty());
  // Room for 5 on server 2: exactly its next 5 live requests leave, then it holds again.
  room2 = 5;
  CHECK(!turn(&n) && n == 5);
  CHECK((sent[2] == std::vector<int>{0, 1, 2, 3, 4}));
  CHECK(!turn(&n) && n == 0);
}

}  // namespace

int main() {
  const int before = CountKvstoreShm();
  TestRoundTrips();
  TestFullRing();
  TestRestart();
  TestViews();
  TestViewsWithoutMemory();
  TestRefusedDescriptors();
  TestRefusedOffers();
  TestWire();
  TestHeldSlices();
  CHECK(CountKvstoreShm() == before);  // memfds: nothing is ever named in /dev/shm
  return check_summary();
}
