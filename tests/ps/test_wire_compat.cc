// test_wire_compat.cc - how the wire format stays safe between builds that speak version 1
// with different sets of flags and message types (src/ps/wire.h).
//
// Shared memory added a flag (kFlagShm: the payload frame is a 24-byte descriptor, not the
// payload) and a message type (SHM_OFFER) without a new wire version. That is safe because
// version 1 has refused every flag bit and every type it does not know since its first
// build: a peer from before shared memory drops a descriptor message as "unknown flags"
// instead of reading the descriptor as 24 bytes of values, and drops SHM_OFFER as an
// unknown type, so it never accepts a segment and is never sent a descriptor. This test
// pins that rule, which every flag added after version 1 relies on (float32 sums, 2bit and
// 1bit packing, rows, exact pulls, shared memory), and the refusal of other versions.
#include <cstring>
#include <string>

#include "ps/shm.h"
#include "ps/wire.h"

extern "C" {
#include "../common/check.h"
}

using namespace kvstore::dist;

// A valid PUSH of 4 float32 elements with its 16-byte payload frame.
static WireHeader Push() {
  WireHeader h = MakeHeader(MsgType::kPush, Role::kWorker, 0);
  h.key = 3;
  h.dtype = KV_FLOAT32;
  h.offset = 0;
  h.total = h.count = 4;
  h.payload_len = 16;
  h.num_frames = 2;
  return h;
}

// The flags a version-1 peer from before shared memory knew (wire.h of that build).
constexpr uint32_t kFlagsBeforeShm = kFlagStrKey | kFlagSync | kFlagFloat32Sum | kFlagTwoBit |
                                     kFlagOneBit | kFlagRowSparse | kFlagExactPull;

static void test_unknown_flags_refused() {
  CHECK(ValidateHeader(Push(), 1, 0, 16).empty());
  // Every bit outside the known flags, this build's and a later one's alike.
  for (int bit = 0; bit < 32; ++bit) {
    const uint32_t f = 1u << bit;
    if ((kFlagKnownFlags & f) != 0) continue;
    WireHeader h = Push();
    h.flags |= f;
    CHECK_MSG(ValidateHeader(h, 1, 0, 16) == "unknown flags", "flag bit %d", bit);
  }
  // The shared-memory flag is one that the build before it did not know: that build's rule
  // (the same check, its own mask) refuses a descriptor message rather than reading it.
  CHECK((kFlagsBeforeShm & kFlagShm) == 0);
  CHECK((kFlagKnownFlags & ~kFlagsBeforeShm) == kFlagShm);
  WireHeader d = Push();
  d.flags |= kFlagShm;
  d.payload_len = 16;  // the bytes in the ring; the frame is the 24-byte descriptor
  CHECK(ValidateHeader(d, 1, 0, 16).empty());  // this build: accepted, then resolved
  CHECK((d.flags & ~kFlagsBeforeShm) != 0);    // the old build: "unknown flags"
}

static void test_unknown_types_and_versions_refused() {
  WireHeader h = Push();
  h.type = static_cast<uint16_t>(MsgType::kMaxType);
  CHECK(ValidateHeader(h, 1, 0, 16) == "unknown message type 30");
  h = Push();
  h.type = 0;
  CHECK(ValidateHeader(h, 1, 0, 16) == "unknown message type 0");
  for (uint16_t v : {uint16_t{0}, uint16_t{2}, uint16_t{0xffff}}) {
    h = Push();
    h.version = v;
    CHECK_MSG(ValidateHeader(h, 1, 0, 16) == "wire version " + std::to_string(v) + ", this build speaks 1",
              "version %u", v);
  }
  CHECK(kWireVersion == 1);
}

int main() {
  test_unknown_flags_refused();
  test_unknown_types_and_versions_refused();
  return check_summary();
}
