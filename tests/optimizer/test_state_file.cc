// test_state_file.cc - the optimizer-states file decoder (optimizer/state_file.h) on hostile
// input. The checksums stop random damage before the body is parsed, so this test also
// damages bodies and then writes correct checksums and lengths over them: the parser itself
// must then refuse every malformed field with INVALID_ARGUMENT (never read out of bounds,
// never allocate what the file merely claims), and an accepted file must re-encode to the
// same bytes. Also: the CRC-32 is zlib's (known check values).
//
// Usage: test_state_file   (white-box: links kvstore_internal)
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "../common/check.h"
#include "core/error.h"
#include "kvstore/kvstore.h"
#include "optimizer/state_file.h"

namespace {

using kvstore::optimizer::Crc32;
using kvstore::optimizer::DecodeStatesFile;
using kvstore::optimizer::EncodeStatesFile;
using kvstore::optimizer::KeyRecord;
using kvstore::optimizer::StateArray;
using kvstore::optimizer::StatesFile;

StatesFile Sample(bool str_keys) {
  StatesFile f;
  f.optimizer = "adam";
  f.spec = "adam(learning_rate=0.01)";
  for (int k = 0; k < 3; ++k) {
    KeyRecord r;
    r.is_str = str_keys;
    r.key = k * 5;
    r.str_key = std::string("key") + static_cast<char>('a' + k);
    r.dtype = k == 1 ? KV_FLOAT64 : KV_FLOAT32;
    r.shape = {2, k + 1};
    r.steps = 3 + k;
    for (int a = 0; a < 2; ++a) {
      StateArray s;
      s.dtype = r.dtype;
      s.shape = r.shape;
      s.bytes.assign(static_cast<size_t>(2 * (k + 1)) * (r.dtype == KV_FLOAT64 ? 8 : 4),
                     static_cast<uint8_t>(a + k));
      r.arrays.push_back(s);
    }
    f.keys.push_back(r);
  }
  return f;
}

void PutU32(std::string* s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*s)[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Writes a correct length and checksums for the (damaged) body after the header.
void Reseal(std::string* s) {
  const uint64_t body = s->size() - 32;
  for (int i = 0; i < 8; ++i) (*s)[16 + i] = static_cast<char>((body >> (8 * i)) & 0xFF);
  PutU32(s, 24, Crc32(s->data() + 32, body));
  PutU32(s, 28, Crc32(s->data(), 28));
}

// Decodes; true when accepted. Anything but INVALID_ARGUMENT fails the test.
bool Decodes(const std::string& bytes) {
  try {
    StatesFile f = DecodeStatesFile(bytes, "fuzz");
    CHECK_MSG(EncodeStatesFile(f) == bytes, "an accepted file does not re-encode to its bytes");
    return true;
  } catch (const kvstore::Error& e) {
    CHECK_MSG(e.code() == KV_ERR_INVALID_ARGUMENT && std::strstr(e.what(), "fuzz") != nullptr,
              "code %d: %s", e.code(), e.what());
    return false;
  }
}

void CrcCheckValues() {
  CHECK(Crc32("123456789", 9) == 0xCBF43926u);  // the CRC-32/ISO-HDLC check value
  CHECK(Crc32("", 0) == 0);
  CHECK(Crc32("6789", 4, Crc32("12345", 5)) == 0xCBF43926u);  // continued
}

void RoundTrip() {
  for (bool str : {false, true}) {
    const std::string bytes = EncodeStatesFile(Sample(str));
    CHECK(Decodes(bytes));
    StatesFile empty;
    empty.optimizer = "sgd";
    CHECK(Decodes(EncodeStatesFile(empty)));
  }
}

void DamagedBodies() {
  std::mt19937 rng(12345);
  int accepted = 0, refused = 0;
  for (bool str : {false, true}) {
    const std::string good = EncodeStatesFile(Sample(str));
    for (int trial = 0; trial < 20000; ++trial) {
      std::string bad = good;
      const int kind = trial % 4;
      if (kind == 0) {  // flip bits
        for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) {
          bad[32 + rng() % (bad.size() - 32)] ^= static_cast<char>(1u << (rng() % 8));
        }
      } else if (kind == 1) {  // truncate the body
        bad.resize(32 + rng() % (bad.size() - 32));
      } else if (kind == 2) {  // a huge or odd 32/64-bit field somewhere
        const size_t at = 32 + rng() % (bad.size() - 32 - 8);
        const uint64_t v = (rng() % 2) ? ~uint64_t{0} - rng() % 4 : rng();
        std::memcpy(&bad[at], &v, rng() % 2 ? 4 : 8);
      } else {  // insert bytes
        bad.insert(32 + rng() % (bad.size() - 32), std::string(1 + rng() % 8, static_cast<char>(rng())));
      }
      Reseal(&bad);
      (Decodes(bad) ? accepted : refused) += 1;
    }
  }
  CHECK_MSG(refused > 30000, "only %d of 40000 damaged files refused", refused);
  std::printf("damaged bodies: %d refused, %d accepted (re-encoded identically)\n", refused, accepted);
}

void HeaderChecks() {
  const std::string good = EncodeStatesFile(Sample(false));
  std::string v2 = good;
  PutU32(&v2, 8, 2);
  PutU32(&v2, 28, Crc32(v2.data(), 28));
  CHECK(!Decodes(v2));
  std::string flags = good;
  PutU32(&flags, 12, 1);
  PutU32(&flags, 28, Crc32(flags.data(), 28));
  CHECK(!Decodes(flags));
  CHECK(!Decodes(""));
  CHECK(!Decodes(good.substr(0, 31)));
}

}  // namespace

int main() {
  CrcCheckValues();
  RoundTrip();
  HeaderChecks();
  DamagedBodies();
  return check_summary();
}
