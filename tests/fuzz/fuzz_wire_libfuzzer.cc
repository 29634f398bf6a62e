// fuzz_wire_libfuzzer.cc - libFuzzer entry point of the wire decoder target (clang
// -fsanitize=fuzzer); see wire_target.h for the input format and docs/RELIABILITY.md for the
// command that builds and runs it.
#include <cstddef>
#include <cstdint>

#include "wire_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvstore::fuzz::RunWireInput(data, size);
  return 0;
}
