// state_file.h - the optimizer-states file: what a store's save_optimizer_states writes and
// its load_optimizer_states reads. docs/OPTIMIZER-STATES.md is the byte-level specification
// (version 1); this header is its in-memory form.
//
// The file is language-neutral (little-endian integers, IEEE values, KV_* dtype codes) and
// self-checking: the header gives the body's exact length and a CRC-32 of it, so a
// truncated, extended or corrupt file is refused before any field of its body is trusted.
// Reading only parses and checks the file's own consistency; whether its keys, shapes and
// optimizer fit a store is the caller's check (key_state.h, the stores).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/array.h"

namespace kvstore {
namespace optimizer {

// One state array of a key: elements of `dtype` in row-major order, `bytes` long.
// Invariant (checked on read): bytes.size() == ShapeSize(shape) * DTypeSize(dtype).
struct StateArray {
  int dtype = 0;
  Shape shape;
  std::vector<uint8_t> bytes;
};

// The saved state of one key: its identity, the stored weight it belongs to, the number of
// committed updates, and the optimizer's state arrays in slot order.
struct KeyRecord {
  bool is_str = false;
  int key = 0;          // int keys
  std::string str_key;  // string keys
  int dtype = 0;        // the stored weight's dtype
  Shape shape;          // the stored weight's shape
  int64_t steps = 0;
  std::vector<StateArray> arrays;

  std::string Name() const;  // 7 or "name", as errors say it
};

struct StatesFile {
  std::string optimizer;  // the optimizer's name ("sgd")
  std::string spec;       // its full spec, every parameter spelled out (CanonicalSpec)
  std::vector<KeyRecord> keys;  // ints ascending, or strings in byte order; no duplicates
};

// The current format version; readers refuse any other.
constexpr uint32_t kStatesFileVersion = 1;

// CRC-32 (ISO-HDLC: polynomial 0xEDB88320, reflected, initial and final xor 0xFFFFFFFF, as
// zlib's crc32) of `n` bytes, continuing from `crc` (0 to start).
uint32_t Crc32(const void* data, size_t n, uint32_t crc = 0);

// The file's bytes.
std::string EncodeStatesFile(const StatesFile& file);
// Parses `bytes` (named `path` in errors). Throws INVALID_ARGUMENT saying what is wrong and
// where: not a states file, an unknown version, a length that differs from the header's
// (truncated or extended), a checksum mismatch (corrupt), or a malformed field (unknown
// dtype, array size that disagrees with its shape, duplicate or unsorted key, trailing bytes).
StatesFile DecodeStatesFile(const std::string& bytes, const std::string& path);

// Writes the file atomically: into "<path>.tmp.<pid>" in the same directory, fsync, rename
// over `path`, fsync of the directory. On failure the temporary file is removed and `path`
// is as it was. Throws INVALID_ARGUMENT with the path and the system's reason.
void WriteStatesFile(const std::string& path, const StatesFile& file);
// Reads and decodes `path`. Throws INVALID_ARGUMENT when it cannot be read or decoded.
StatesFile ReadStatesFile(const std::string& path);

}  // namespace optimizer
}  // namespace kvstore
