// wire_target.h - the fuzz target of the wire decoder, shared by the libFuzzer entry point
// (fuzz_wire_libfuzzer.cc, clang) and the bounded random-frame driver (fuzz_wire.cc, any
// compiler).
//
// Input format (every byte string is a valid input):
//   byte 0        mode: bit 0 set = the message arrives on a ROUTER socket (a routing id
//                 frame is prepended by ZeroMQ), clear = on a PAIR socket;
//                 bit 1 set = the receiver shares a shared-memory segment with the sender
//                 (shm.h, as after an accepted SHM_OFFER), and a message whose header
//                 carries kFlagShm with 1 <= payload_len <= kShmRingBytes has its payload
//                 put into the sender's ring first: its payload frame, when it has 24 bytes,
//                 is then read as a delta (three u64 added to offset, len and end) to the
//                 real descriptor, so an all-zero frame describes the payload exactly;
//                 bit 2 set (with bit 1) = the receiver has no segment for this sender
//                 (a descriptor from a peer it never accepted)
//   then frames   each as a 2-byte little-endian length and that many bytes (a length past
//                 the end of the input takes what is left); at most kMaxFrames frames
// The target sends the frames as one multipart message over an in-process ZeroMQ socket
// pair and decodes it with RecvMessage (header validation included), then runs the text
// decoders of the protocol on the string frame: ParseTable (node tables), ParsePorts (port
// lists) and ParseSpec (optimizer specs). It aborts, with the reason on stderr, when a
// decoder breaks a property it documents (see wire_target.cc); sanitizers report the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvstore {
namespace fuzz {

constexpr size_t kMaxFrames = 7;
constexpr uint8_t kModeRouter = 1, kModeShm = 2, kModeShmUnknownPeer = 4;
// Each direction's ring in shared-memory mode (small, so that payloads wrap and fill it).
constexpr size_t kShmRingBytes = 64u << 10;

// Counters of one process: messages decoded, how many were accepted, frames sent; of the
// messages with a shared-memory descriptor, how many were decoded, how many had their
// payload taken from a ring, and the segments made (a ring a refused or forged descriptor
// left full, or turned off, is replaced).
struct WireStats {
  uint64_t messages = 0, accepted = 0, frames = 0, tables = 0, specs = 0;
  uint64_t shm_messages = 0, shm_accepted = 0, shm_segments = 0;
};

// Runs one input. Never returns on a property violation (abort).
void RunWireInput(const uint8_t* data, size_t size);
const WireStats& GetWireStats();

// Builds an input from its parts (the driver's generator and tests use it); `mode` as byte 0.
std::string EncodeWireInput(uint8_t mode, const std::vector<std::string>& frames);
inline std::string EncodeWireInput(bool router, const std::vector<std::string>& frames) {
  return EncodeWireInput(static_cast<uint8_t>(router ? kModeRouter : 0), frames);
}

}  // namespace fuzz
}  // namespace kvstore
