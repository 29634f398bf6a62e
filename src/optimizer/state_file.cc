// state_file.cc - encoding, decoding and atomic writing of the optimizer-states file
// (docs/OPTIMIZER-STATES.md). Decoding trusts nothing: every length is checked against the
// bytes that remain before it is used, so any input gives a precise error, never a read out
// of bounds or a huge allocation.
#include "optimizer/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "core/dtype.h"
#include "core/error.h"

// State arrays are copied between the file and memory as bytes.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the optimizer states file stores values little-endian, as this host keeps them");

namespace kvstore {
namespace optimizer {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'O', 'S', 'T', 'A', 'T', 'E'};
constexpr size_t kHeaderBytes = 32;
constexpr uint32_t kKeysNone = 0, kKeysInt = 1, kKeysStr = 2;
constexpr uint32_t kMaxDims = 32;

// Little-endian appends.
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void PutStr(std::string* out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}
void PutShape(std::string* out, const Shape& shape) {
  PutU32(out, static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) PutU64(out, static_cast<uint64_t>(d));
}

uint32_t GetU32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t GetU64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A bounds-checked cursor over the body; every error names the file and the body offset.
class Reader {
 public:
  // The body: `n` bytes at `p`, which start at byte `base` of the file.
  Reader(const unsigned char* p, size_t n, size_t base, const std::string& path)
      : p_(p), n_(n), base_(base), path_(path) {}

  size_t remaining() const { return n_ - pos_; }
  size_t offset() const { return base_ + pos_; }

  [[noreturn]] void Fail(const std::string& what) const {
    KV_FAIL(KV_ERR_INVALID_ARGUMENT, "optimizer states file '%s': %s at byte %zu", path_.c_str(),
            what.c_str(), offset());
  }
  void Need(size_t bytes, const char* what) const {
    if (remaining() < bytes) {
      Fail(StrFormat("%s needs %zu bytes but only %zu remain", what, bytes, remaining()));
    }
  }
  uint32_t U32(const char* what) {
    Need(4, what);
    pos_ += 4;
    return GetU32(p_ + pos_ - 4);
  }
  uint64_t U64(const char* what) {
    Need(8, what);
    pos_ += 8;
    return GetU64(p_ + pos_ - 8);
  }
  int32_t I32(const char* what) { return static_cast<int32_t>(U32(what)); }
  std::string Str(const char* what) {
    const uint32_t len = U32(what);
    Need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  void Bytes(size_t len, std::vector<uint8_t>* out, const char* what) {
    Need(len, what);
    out->assign(p_ + pos_, p_ + pos_ + len);
    pos_ += len;
  }
  int DType(const char* what) {
    const size_t at = offset();
    const int32_t dtype = I32(what);
    if (!IsValidDType(dtype)) {
      KV_FAIL(KV_ERR_INVALID_ARGUMENT, "optimizer states file '%s': %s %d is not a dtype at byte %zu",
              path_.c_str(), what, dtype, at);
    }
    return dtype;
  }
  // A shape and its element count; dimensions are non-negative and their product fits.
  Shape ReadShape(const char* what, uint64_t* elements) {
    const uint32_t ndim = U32(what);
    if (ndim > kMaxDims) Fail(StrFormat("%s has %u dimensions (at most %u)", what, ndim, kMaxDims));
    Shape shape;
    uint64_t count = 1;
    for (uint32_t i = 0; i < ndim; ++i) {
      const uint64_t d = U64(what);
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          (d != 0 && count > std::numeric_limits<uint64_t>::max() / 2 / d)) {
        Fail(StrFormat("%s dimension %u (%llu) is out of range", what, i,
                       static_cast<unsigned long long>(d)));
      }
      count *= d;
      shape.push_back(static_cast<int64_t>(d));
    }
    *elements = count;
    return shape;
  }

 private:
  const unsigned char* p_;
  size_t n_;
  size_t pos_ = 0;
  size_t base_;  // offset of the body in the file
  const std::string& path_;
};

void EncodeKey(std::string* out, const KeyRecord& k) {
  if (k.is_str) PutStr(out, k.str_key);
  else PutU32(out, static_cast<uint32_t>(k.key));
  PutU32(out, static_cast<uint32_t>(k.dtype));
  PutShape(out, k.shape);
  PutU64(out, static_cast<uint64_t>(k.steps));
  PutU32(out, static_cast<uint32_t>(k.arrays.size()));
  for (const StateArray& a : k.arrays) {
    PutU32(out, static_cast<uint32_t>(a.dtype));
    PutShape(out, a.shape);
    PutU64(out, a.bytes.size());
    out->append(reinterpret_cast<const char*>(a.bytes.data()), a.bytes.size());
  }
}

KeyRecord DecodeKey(Reader* r, bool is_str) {
  KeyRecord k;
  k.is_str = is_str;
  if (is_str) k.str_key = r->Str("string key");
  else k.key = r->I32("int key");
  k.dtype = r->DType("weight dtype");
  uint64_t elements = 0;
  k.shape = r->ReadShape("weight shape", &elements);
  k.steps = static_cast<int64_t>(r->U64("step count"));
  if (k.steps < 0) r->Fail("negative step count");
  const uint32_t num_arrays = r->U32("array count");
  for (uint32_t i = 0; i < num_arrays; ++i) {
    StateArray a;
    a.dtype = r->DType("state dtype");
    uint64_t count = 0;
    a.shape = r->ReadShape("state shape", &count);
    const uint64_t nbytes = r->U64("state byte count");
    if (count > std::numeric_limits<uint64_t>::max() / 8 || nbytes != count * DTypeSize(a.dtype)) {
      r->Fail(StrFormat("key %s state array %u has %llu bytes, its shape %s of %s needs %llu",
                        k.Name().c_str(), i, static_cast<unsigned long long>(nbytes),
                        ShapeToString(a.shape).c_str(), DTypeName(a.dtype),
                        static_cast<unsigned long long>(count * DTypeSize(a.dtype))));
    }
    r->Bytes(static_cast<size_t>(nbytes), &a.bytes, "state array");
    k.arrays.push_back(std::move(a));
  }
  return k;
}

std::string SysError(const char* what, const std::string& path) {
  return StrFormat("optimizer states file '%s': %s: %s", path.c_str(), what, std::strerror(errno));
}

// Writes all of `data` to `fd`; false with errno set on failure.
bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string KeyRecord::Name() const {
  return is_str ? StrFormat("\"%s\"", str_key.c_str()) : StrFormat("%d", key);
}

uint32_t Crc32(const void* data, size_t n, uint32_t crc) {
  static const struct Table {
    uint32_t v[256];
    Table() {
      for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        v[i] = c;
      }
    }
  } table;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table.v[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::string EncodeStatesFile(const StatesFile& file) {
  std::string body;
  PutStr(&body, file.optimizer);
  PutStr(&body, file.spec);
  const bool is_str = !file.keys.empty() && file.keys[0].is_str;
  PutU32(&body, file.keys.empty() ? kKeysNone : is_str ? kKeysStr : kKeysInt);
  PutU64(&body, file.keys.size());
  for (const KeyRecord& k : file.keys) EncodeKey(&body, k);

  std::string out(kMagic, sizeof kMagic);
  PutU32(&out, kStatesFileVersion);
  PutU32(&out, 0);  // flags: none defined
  PutU64(&out, body.size());
  PutU32(&out, Crc32(body.data(), body.size()));
  PutU32(&out, Crc32(out.data(), out.size()));
  out.append(body);
  return out;
}

StatesFile DecodeStatesFile(const std::string& bytes, const std::string& path) {
  const char* p = path.c_str();
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  KV_CHECK(bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
           KV_ERR_INVALID_ARGUMENT, "'%s' is not an optimizer states file (no KVOSTATE magic)", p);
  KV_CHECK(bytes.size() >= kHeaderBytes, KV_ERR_INVALID_ARGUMENT,
           "optimizer states file '%s' is truncated: %zu bytes, shorter than its %zu-byte header", p,
           bytes.size(), kHeaderBytes);
  KV_CHECK(GetU32(u + 28) == Crc32(u, 28), KV_ERR_INVALID_ARGUMENT,
           "optimizer states file '%s' is corrupt: the header checksum does not match", p);
  const uint32_t version = GetU32(u + 8);
  KV_CHECK(version == kStatesFileVersion, KV_ERR_INVALID_ARGUMENT,
           "optimizer states file '%s' has format version %u; this library reads version %u", p,
           version, kStatesFileVersion);
  KV_CHECK(GetU32(u + 12) == 0, KV_ERR_INVALID_ARGUMENT,
           "optimizer states file '%s' sets flags 0x%x that version %u does not define", p,
           GetU32(u + 12), version);
  const uint64_t body_len = GetU64(u + 16);
  const uint64_t have = bytes.size() - kHeaderBytes;
  KV_CHECK(have == body_len, KV_ERR_INVALID_ARGUMENT,
           "optimizer states file '%s' is %s: its header gives a %llu-byte body, the file has %llu", p,
           have < body_len ? "truncated" : "longer than written", static_cast<unsigned long long>(body_len),
           static_cast<unsigned long long>(have));
  KV_CHECK(GetU32(u + 24) == Crc32(u + kHeaderBytes, have), KV_ERR_INVALID_ARGUMENT,
           "optimizer states file '%s' is corrupt: the body checksum does not match", p);

  Reader r(u + kHeaderBytes, bytes.size() - kHeaderBytes, kHeaderBytes, path);
  StatesFile file;
  file.optimizer = r.Str("optimizer name");
  file.spec = r.Str("optimizer spec");
  const uint32_t kind = r.U32("key kind");
  if (kind > kKeysStr) r.Fail(StrFormat("key kind %u is none of 0, 1, 2", kind));
  const uint64_t num_keys = r.U64("key count");
  if (kind == kKeysNone && num_keys != 0) r.Fail("keys without a key kind");
  if (num_keys > r.remaining()) r.Fail("key count larger than the file");
  for (uint64_t i = 0; i < num_keys; ++i) {
    KeyRecord k = DecodeKey(&r, kind == kKeysStr);
    if (!file.keys.empty()) {
      const KeyRecord& prev = file.keys.back();
      const bool ascending = k.is_str ? prev.str_key < k.str_key : prev.key < k.key;
      if (!ascending) r.Fail(StrFormat("key %s follows key %s (keys are unique and ascending)",
                                       k.Name().c_str(), prev.Name().c_str()));
    }
    file.keys.push_back(std::move(k));
  }
  if (r.remaining() != 0) r.Fail(StrFormat("%zu bytes after the last key", r.remaining()));
  return file;
}

void WriteStatesFile(const std::string& path, const StatesFile& file) {
  KV_CHECK(!path.empty(), KV_ERR_INVALID_ARGUMENT, "optimizer states file: empty path");
  const std::string bytes = EncodeStatesFile(file);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  KV_CHECK(fd >= 0, KV_ERR_INVALID_ARGUMENT, "%s", SysError("cannot create the temporary file", tmp).c_str());
  const char* failed = nullptr;
  if (!WriteAll(fd, bytes.data(), bytes.size())) failed = "write failed";
  else if (::fsync(fd) != 0) failed = "fsync failed";
  const int saved = errno;
  if (::close(fd) != 0 && failed == nullptr) failed = "close failed";
  else errno = saved;
  if (failed == nullptr && ::rename(tmp.c_str(), path.c_str()) != 0) failed = "rename failed";
  if (failed != nullptr) {
    const std::string message = SysError(failed, path);
    ::unlink(tmp.c_str());
    KV_FAIL(KV_ERR_INVALID_ARGUMENT, "%s", message.c_str());
  }
  // Make the rename durable. The file is complete either way, so a directory that cannot be
  // opened for fsync (some file systems) is not an error.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

StatesFile ReadStatesFile(const std::string& path) {
  KV_CHECK(!path.empty(), KV_ERR_INVALID_ARGUMENT, "optimizer states file: empty path");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KV_CHECK(fd >= 0, KV_ERR_INVALID_ARGUMENT, "%s", SysError("cannot open", path).c_str());
  std::string bytes;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string message = SysError("read failed", path);
      ::close(fd);
      KV_FAIL(KV_ERR_INVALID_ARGUMENT, "%s", message.c_str());
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return DecodeStatesFile(bytes, path);
}

}  // namespace optimizer
}  // namespace kvstore
