// security.h - job authentication (ZeroMQ CURVE keys derived from one job secret, a ZAP
// handler that admits only the job's key) and the transport's message bound.
//
// Keys. Every node of a job reads the same secret (KVSTORE_JOB_SECRET, or the file named by
// KVSTORE_JOB_SECRET_FILE) and derives two CURVE key pairs from it with libsodium:
//     master        = BLAKE2b-256(secret)                      (crypto_generichash)
//     listen secret = KDF(master, id 1, context "kvstore1")     (crypto_kdf_derive_from_key)
//     member secret = KDF(master, id 2, context "kvstore1")
//     public keys   = X25519 base-point multiples of the secrets (crypto_scalarmult_base)
// Listening sockets (the scheduler's, each server's) are CURVE servers with the listen pair;
// connecting sockets (every node to the scheduler, workers to servers) are CURVE clients with
// the member pair and the listen public key. A CURVE handshake succeeds only when the client
// knows the listen public key and the server holds its secret; the ZAP handler (AuthGuard)
// then admits only clients that proved they hold the member secret. Nothing a peer sends is
// delivered to the node before both checks pass, and every frame after them is encrypted
// and authenticated (CurveZMQ). See docs/SECURITY.md for the threat model.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace kvstore {
namespace dist {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 4096;

// The CURVE keys of one job (binary, 32 bytes each).
struct JobKeys {
  uint8_t listen_public[32];
  uint8_t listen_secret[32];
  uint8_t member_public[32];
  uint8_t member_secret[32];
  ~JobKeys();  // wipes the secrets
};

// Derives the keys of a job from its secret (any bytes; the caller checks the length).
void DeriveJobKeys(const std::string& secret, JobKeys* out);

// The job keys of this process, from KVSTORE_JOB_SECRET or KVSTORE_JOB_SECRET_FILE (the
// file's bytes; one trailing newline is ignored). Null when neither is set: the job runs
// open, and the first call prints one warning line per process naming the variable that
// turns security on. Loaded again when the variables change (each store reads the
// environment as it is when the store is created). Throws INVALID_ARGUMENT naming the
// variable when both are set, the file cannot be read, is not a regular file, can be read
// by its group or others, or the secret is shorter than kMinSecretBytes or longer than
// kMaxSecretBytes; NOT_SUPPORTED when libzmq was built without CURVE.
std::shared_ptr<const JobKeys> ProcessJobKeys();

// The largest value part a node accepts in one message: KVSTORE_MAX_MESSAGE_BYTES, default
// kDefaultMaxMessageBytes. Throws INVALID_ARGUMENT for a value that is not an integer in
// [kMaxStringFrame, 2^62].
constexpr int64_t kDefaultMaxMessageBytes = int64_t{512} << 20;
int64_t MaxMessageBytes();

// Runs the ZAP handler of one ZeroMQ context and watches the handshakes of its listening
// socket, on a thread of its own (none when the job is open). Refused peers are logged,
// rate-limited. Construct it after the listening socket and before that socket binds;
// destroy it before the socket and the context (declare it after both).
class AuthGuard {
 public:
  AuthGuard(zmq::context_t& ctx, zmq::socket_t& listener, const char* node);
  ~AuthGuard();
  AuthGuard(const AuthGuard&) = delete;
  AuthGuard& operator=(const AuthGuard&) = delete;

 private:
  void Loop();
  void AnswerZap();
  void ReadMonitor();

  std::shared_ptr<const JobKeys> keys_;
  std::string node_;
  std::unique_ptr<zmq::socket_t> zap_, monitor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace dist
}  // namespace kvstore
