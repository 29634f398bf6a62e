// test_dist_security.cc - job keys from the secret variables, the message bound, and the
// rate-limited log (unit test compiled from the library's sources).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ps/config.h"
#include "ps/log.h"
#include "ps/placement.h"
#include "ps/security.h"
#include "ps/wire.h"
#include "../common/check.h"

using namespace kvstore;
using namespace kvstore::dist;

namespace {

// Runs `fn`, which must throw an Error of `code` whose message contains `part`.
template <typename F>
void ExpectError(F fn, int code, const char* part) {
  try {
    fn();
  } catch (const Error& e) {
    REQUIRE(e.code() == code && std::strstr(e.what(), part) != nullptr,
          "want code %d with \"%s\", got %d: %s", code, part, e.code(), e.what());
    return;
  }
  REQUIRE(false, "no error; want \"%s\"", part);
}

bool SameKeys(const JobKeys& a, const JobKeys& b) {
  return std::memcmp(a.listen_public, b.listen_public, 32) == 0 &&
         std::memcmp(a.listen_secret, b.listen_secret, 32) == 0 &&
         std::memcmp(a.member_public, b.member_public, 32) == 0 &&
         std::memcmp(a.member_secret, b.member_secret, 32) == 0;
}

// The number of lines in `path` that contain `part`.
int CountLines(const char* path, const char* part) {
  FILE* f = std::fopen(path, "r");
  REQUIRE(f != nullptr, "open %s", path);
  char line[4096];
  int n = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) n += std::strstr(line, part) != nullptr;
  std::fclose(f);
  return n;
}

}  // namespace

int main() {
  // Derivation: deterministic, secret-dependent, four distinct keys, publics match secrets.
  const std::string secret = "0123456789abcdef0123456789abcdef";
  JobKeys a, b, c;
  DeriveJobKeys(secret, &a);
  DeriveJobKeys(secret, &b);
  DeriveJobKeys(secret + "x", &c);
  REQUIRE(SameKeys(a, b), "the same secret gave different keys");
  REQUIRE(std::memcmp(a.listen_public, c.listen_public, 32) != 0 &&
            std::memcmp(a.member_public, c.member_public, 32) != 0,
        "different secrets gave the same keys");
  REQUIRE(std::memcmp(a.listen_secret, a.member_secret, 32) != 0 &&
            std::memcmp(a.listen_public, a.member_public, 32) != 0,
        "listen and member keys coincide");
  char zpub[41], zsec[41], zderived[41];
  REQUIRE(zmq_z85_encode(zsec, a.member_secret, 32) != nullptr && zmq_curve_public(zderived, zsec) == 0 &&
            zmq_z85_encode(zpub, a.member_public, 32) != nullptr && std::strcmp(zpub, zderived) == 0,
        "the member public key is not the one libzmq derives from the secret key");

  // The variables.
  unsetenv("KVSTORE_JOB_SECRET");
  unsetenv("KVSTORE_JOB_SECRET_FILE");
  REQUIRE(ProcessJobKeys() == nullptr, "no secret must give an open job");
  setenv("KVSTORE_JOB_SECRET", "", 1);
  REQUIRE(ProcessJobKeys() == nullptr, "an empty secret must give an open job");
  setenv("KVSTORE_JOB_SECRET", secret.c_str(), 1);
  auto k1 = ProcessJobKeys();
  REQUIRE(k1 && SameKeys(*k1, a), "KVSTORE_JOB_SECRET did not give the derived keys");
  setenv("KVSTORE_JOB_SECRET", "short", 1);
  ExpectError([] { ProcessJobKeys(); }, KV_ERR_INVALID_ARGUMENT, "KVSTORE_JOB_SECRET is 5 bytes");

  char path[] = "/tmp/kvstore-secret-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0, "mkstemp");
  const std::string content = secret + "\n";
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()), "write");
  close(fd);
  setenv("KVSTORE_JOB_SECRET_FILE", path, 1);
  ExpectError([] { ProcessJobKeys(); }, KV_ERR_INVALID_ARGUMENT,
              "both KVSTORE_JOB_SECRET and KVSTORE_JOB_SECRET_FILE");
  unsetenv("KVSTORE_JOB_SECRET");
  REQUIRE(chmod(path, 0600) == 0, "chmod");
  auto k2 = ProcessJobKeys();
  REQUIRE(k2 && SameKeys(*k2, a), "the file (with a trailing newline) did not give the keys of its secret");
  for (mode_t mode : {0640, 0604, 0660, 0610}) {
    REQUIRE(chmod(path, mode) == 0, "chmod");
    ExpectError([] { ProcessJobKeys(); }, KV_ERR_INVALID_ARGUMENT,
                (std::string("KVSTORE_JOB_SECRET_FILE=") + path + " can be accessed by its group or others").c_str());
  }
  unlink(path);
  ExpectError([] { ProcessJobKeys(); }, KV_ERR_INVALID_ARGUMENT, "cannot be opened");
  setenv("KVSTORE_JOB_SECRET_FILE", "/tmp", 1);
  ExpectError([] { ProcessJobKeys(); }, KV_ERR_INVALID_ARGUMENT, "is not a regular file");
  unsetenv("KVSTORE_JOB_SECRET_FILE");

  // The message bound.
  REQUIRE(MaxMessageBytes() == kDefaultMaxMessageBytes, "default bound");
  setenv("KVSTORE_MAX_MESSAGE_BYTES", "2097152", 1);
  REQUIRE(MaxMessageBytes() == 2097152, "KVSTORE_MAX_MESSAGE_BYTES");
  ExpectError([] { CheckPartsFit(PlanParts(false, 3, "", 600000, 1, 1000000), 4, "3"); },
              KV_ERR_INVALID_ARGUMENT, "KVSTORE_MAX_MESSAGE_BYTES");
  CheckPartsFit(PlanParts(false, 3, "", 600000, 2, 100000), 4, "3");  // two parts of 1.2 MB
  setenv("KVSTORE_MAX_MESSAGE_BYTES", "1000", 1);
  ExpectError([] { MaxMessageBytes(); }, KV_ERR_INVALID_ARGUMENT, "KVSTORE_MAX_MESSAGE_BYTES");
  unsetenv("KVSTORE_MAX_MESSAGE_BYTES");

  // The rate-limited log: kFirst lines in full, then nothing until the period ends, then one
  // count line; the destructor reports what is left. stderr goes to a file meanwhile.
  char log_path[] = "/tmp/kvstore-log-XXXXXX";
  const int log_fd = mkstemp(log_path);
  REQUIRE(log_fd >= 0, "mkstemp");
  std::fflush(stderr);
  const int saved = dup(2);
  REQUIRE(dup2(log_fd, 2) == 2, "dup2");
  {
    RateLimitedLog log("test events");
    for (int i = 0; i < 10000; ++i) log.Event("event %d", i);
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(log_fd);
  const int full = CountLines(log_path, "] event ");
  const int counted = CountLines(log_path, "9995 more test events (10000 in all), the last: event 9999");
  unlink(log_path);
  REQUIRE(full == static_cast<int>(RateLimitedLog::kFirst), "%d events logged in full, want %d", full,
        static_cast<int>(RateLimitedLog::kFirst));
  REQUIRE(counted == 1, "the remaining count was not reported at the end");
  std::printf("PASS dist security unit\n");
  return 0;
}
