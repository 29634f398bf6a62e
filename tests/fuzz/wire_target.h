// wire_target.h - the fuzz target of the wire decoder, shared by the libFuzzer entry point
// (fuzz_wire_libfuzzer.cc, clang) and the bounded random-frame driver (fuzz_wire.cc, any
// compiler).
//
// Input format (every byte string is a valid input):
//   byte 0        mode: bit 0 set = the message arrives on a ROUTER socket (a routing id
//                 frame is prepended by ZeroMQ), clear = on a PAIR socket
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

// Counters of one process: messages decoded, how many were accepted, frames sent.
struct WireStats {
  uint64_t messages = 0, accepted = 0, frames = 0, tables = 0, specs = 0;
};

// Runs one input. Never returns on a property violation (abort).
void RunWireInput(const uint8_t* data, size_t size);
const WireStats& GetWireStats();

// Builds an input from its parts (the driver's generator and tests use it).
std::string EncodeWireInput(bool router, const std::vector<std::string>& frames);

}  // namespace fuzz
}  // namespace kvstore
