// Unit test of Config::Load, the environment parsing of every distributed role: each numeric
// variable accepts a decimal value with surrounding blanks (both sides alike), treats an
// empty or blank value as unset, and rejects anything else with an INVALID_ARGUMENT error
// that names the variable, the value and the accepted range.
#include <clocale>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ps/config.h"
#include "../common/check.h"

using kvstore::dist::Config;

namespace {

// Every variable Config::Load reads; each case starts from a job of 2 workers and 1 server.
const char* const kVars[] = {
    "DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER",
    "DMLC_NODE_HOST", "DMLC_INTERFACE", "PORT", "PS_VERBOSE", "DMLC_WORKER_ID", "DMLC_SERVER_ID",
    "KVSTORE_BIGARRAY_BOUND", "MXNET_KVSTORE_BIGARRAY_BOUND", "KVSTORE_TIMEOUT_SEC",
    "KVSTORE_IO_THREADS", "PS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_TIMEOUT",
    "KVSTORE_HEARTBEAT_INTERVAL_SEC", "KVSTORE_HEARTBEAT_TIMEOUT_SEC", "KVSTORE_SPIN_US"};

using Env = std::vector<std::pair<const char*, const char*>>;

// Loads a Config from the base job plus `env` (later entries win). Returns the error message
// ("" on success); *code gets the error code (0 on success).
std::string Load(const Env& env, Config* out = nullptr, int* code = nullptr) {
  for (const char* v : kVars) unsetenv(v);
  setenv("DMLC_ROLE", "worker", 1);
  setenv("DMLC_PS_ROOT_URI", "127.0.0.1", 1);
  setenv("DMLC_PS_ROOT_PORT", "9000", 1);
  setenv("DMLC_NUM_WORKER", "2", 1);
  setenv("DMLC_NUM_SERVER", "1", 1);
  for (const auto& kv : env) setenv(kv.first, kv.second, 1);
  if (code != nullptr) *code = 0;
  try {
    Config c = Config::Load();
    if (out != nullptr) *out = c;
    return "";
  } catch (const kvstore::Error& e) {
    if (code != nullptr) *code = e.code();
    return e.what();
  }
}

// `name`=`value` must be rejected with INVALID_ARGUMENT naming the variable and `range`.
void ExpectRejected(const char* name, const char* value, const char* range, const Env& extra = {}) {
  Env env = extra;
  env.emplace_back(name, value);
  int code = 0;
  const std::string msg = Load(env, nullptr, &code);
  const bool ok = code == KV_ERR_INVALID_ARGUMENT && msg.find(name) != std::string::npos &&
                  msg.find(range) != std::string::npos;
  CHECK_MSG(ok, "%s='%s': code %d, message \"%s\" (want INVALID_ARGUMENT naming %s and %s)",
            name, value, code, msg.c_str(), name, range);
}

// `name`=`value` must load; returns the Config.
Config ExpectLoaded(const Env& env) {
  Config c;
  const std::string msg = Load(env, &c);
  CHECK_MSG(msg.empty(), "unexpected error: %s", msg.c_str());
  return c;
}

}  // namespace

int main() {
  // Surrounding blanks are ignored on both sides, for every numeric variable.
  for (const char* v : {"9100", " 9100", "9100 ", "\t9100\n", "  9100  "}) {
    CHECK(ExpectLoaded({{"DMLC_PS_ROOT_PORT", v}}).root_port == 9100);
  }
  CHECK(ExpectLoaded({{"DMLC_NUM_WORKER", "3 "}, {"DMLC_WORKER_ID", " 2 "}}).requested_rank == 2);
  CHECK(ExpectLoaded({{"KVSTORE_TIMEOUT_SEC", " 2.5\n"}}).timeout_sec == 2.5);
  CHECK(ExpectLoaded({{"KVSTORE_HEARTBEAT_INTERVAL_SEC", "0.25 "}}).heartbeat_interval_sec == 0.25);
  CHECK(ExpectLoaded({{"MXNET_KVSTORE_BIGARRAY_BOUND", "1000 "}}).bigarray_bound == 1000);

  // Empty or blank: unset, so the default applies (and a required variable is missing).
  {
    Config c = ExpectLoaded({{"KVSTORE_TIMEOUT_SEC", ""}, {"PORT", "   "}, {"PS_VERBOSE", "\t"}});
    CHECK(c.timeout_sec == 60 && c.port == 0 && c.verbose == 0);
    int code = 0;
    const std::string msg = Load({{"DMLC_PS_ROOT_PORT", "  "}}, nullptr, &code);
    CHECK(code == KV_ERR_INVALID_ARGUMENT && msg.find("DMLC_PS_ROOT_PORT is not set") != std::string::npos);
  }

  // Defaults and the ps-lite names (honoured when positive; ours win).
  {
    Config c = ExpectLoaded({});
    CHECK(c.timeout_sec == 60 && c.heartbeat_interval_sec == 1 && c.heartbeat_timeout_sec == 10);
    CHECK(c.requested_rank == -1 && c.bigarray_bound == 1000000 && c.io_threads == 0);
    CHECK(c.spin_us == 50 && ExpectLoaded({{"KVSTORE_SPIN_US", "0"}}).spin_us == 0);
    c = ExpectLoaded({{"PS_HEARTBEAT_INTERVAL", "0"}, {"PS_HEARTBEAT_TIMEOUT", "0"}});
    CHECK(c.heartbeat_interval_sec == 1 && c.heartbeat_timeout_sec == 10);
    c = ExpectLoaded({{"PS_HEARTBEAT_INTERVAL", "2"}, {"PS_HEARTBEAT_TIMEOUT", "30"}});
    CHECK(c.heartbeat_interval_sec == 2 && c.heartbeat_timeout_sec == 30);
    c = ExpectLoaded({{"PS_HEARTBEAT_INTERVAL", "2"}, {"KVSTORE_HEARTBEAT_INTERVAL_SEC", "0.5"}});
    CHECK(c.heartbeat_interval_sec == 0.5);
    c = ExpectLoaded({{"KVSTORE_TIMEOUT_SEC", "0"}});  // 0 = wait forever
    CHECK(c.timeout_sec == 0);
    // A heartbeat timeout below two intervals is raised to two intervals (documented).
    c = ExpectLoaded({{"KVSTORE_HEARTBEAT_INTERVAL_SEC", "3"}, {"KVSTORE_HEARTBEAT_TIMEOUT_SEC", "1"}});
    CHECK(c.heartbeat_timeout_sec == 6);
  }

  // Every numeric variable: malformed values and values out of range name the variable and
  // the accepted range.
  struct IntVar {
    const char* name;
    const char* range;
    std::vector<const char*> bad;
  };
  const std::vector<IntVar> ints = {
      {"DMLC_PS_ROOT_PORT", "[1, 65535]", {"0", "65536", "-1", "80a", "8 0", "0x50", "+80", "1e3", "x"}},
      {"DMLC_NUM_WORKER", "[1, 100000]", {"0", "100001", "two", "2.0", "-2"}},
      {"DMLC_NUM_SERVER", "[1, 100000]", {"0", "1.5", "1,2", "99999999999999999999"}},
      {"PORT", "[0, 65535]", {"65536", "-1", "http", "80/tcp"}},
      {"PS_VERBOSE", "[0, 10]", {"11", "-1", "yes", "1.0"}},
      {"DMLC_WORKER_ID", "[-1, 1]", {"2", "-2", "0x1", "one"}},
      {"KVSTORE_BIGARRAY_BOUND", "[1, 9223372036854775807]", {"0", "-5", "1e6", "9223372036854775808"}},
      {"MXNET_KVSTORE_BIGARRAY_BOUND", "[1, 9223372036854775807]", {"0", "1M"}},
      {"KVSTORE_IO_THREADS", "[0, 64]", {"65", "-1", "auto"}},
      {"KVSTORE_SPIN_US", "[0, 10000]", {"10001", "-1", "50us"}},
  };
  for (const IntVar& v : ints) {
    for (const char* bad : v.bad) ExpectRejected(v.name, bad, v.range);
  }
  ExpectRejected("DMLC_SERVER_ID", "1", "[-1, 0]", {{"DMLC_ROLE", "server"}});
  ExpectRejected("DMLC_SERVER_ID", "s0", "[-1, 0]", {{"DMLC_ROLE", "server"}});

  struct SecVar {
    const char* name;
    const char* range;
    std::vector<const char*> bad;
  };
  const std::vector<SecVar> secs = {
      // Hex floats, infinities and values whose conversion to milliseconds would overflow
      // are not durations.
      {"KVSTORE_TIMEOUT_SEC", "[0.001, 10000000] or 0", {"-1", "0.0001", "1e300", "inf", "nan", "0x10", "10s", "1,5"}},
      {"KVSTORE_HEARTBEAT_INTERVAL_SEC", "[0.001, 3600]", {"0", "0.0001", "3601", "-1", "inf", "fast"}},
      {"KVSTORE_HEARTBEAT_TIMEOUT_SEC", "[0.001, 10000000]", {"0", "-3", "1e300", "nan", "10 s"}},
      {"PS_HEARTBEAT_INTERVAL", "[0.001, 3600] or 0", {"-1", "0.0005", "3601", "1e9", "x"}},
      {"PS_HEARTBEAT_TIMEOUT", "[0.001, 10000000] or 0", {"-1", "1e300", "x"}},
  };
  for (const SecVar& v : secs) {
    for (const char* bad : v.bad) ExpectRejected(v.name, bad, v.range);
  }

  // The helpers themselves, for variables read outside Config (same rules).
  setenv("KVSTORE_TEST_CONFIG_INT", " 7\n", 1);
  CHECK(kvstore::dist::EnvInt("KVSTORE_TEST_CONFIG_INT", 5, 1, 9) == 7);
  setenv("KVSTORE_TEST_CONFIG_INT", "", 1);
  CHECK(kvstore::dist::EnvInt("KVSTORE_TEST_CONFIG_INT", 5, 1, 9) == 5);
  setenv("KVSTORE_TEST_CONFIG_INT", "10", 1);
  try {
    kvstore::dist::EnvInt("KVSTORE_TEST_CONFIG_INT", 5, 1, 9);
    CHECK(false);
  } catch (const kvstore::Error& e) {
    CHECK(std::string(e.what()) == "KVSTORE_TEST_CONFIG_INT='10' is not an integer in [1, 9]");
  }
  unsetenv("KVSTORE_TEST_CONFIG_INT");

  // A long value is quoted in part, not whole.
  {
    const std::string big(100000, '7');
    int code = 0;
    const std::string msg = Load({{"KVSTORE_TIMEOUT_SEC", big.c_str()}}, nullptr, &code);
    CHECK(code == KV_ERR_INVALID_ARGUMENT && msg.size() < 400);
  }

  // Parsing does not follow the C locale: a host (a JVM, a Perl or Python program) may have
  // switched LC_NUMERIC to a locale whose decimal separator is a comma.
  for (const char* loc : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"}) {
    if (std::setlocale(LC_NUMERIC, loc) != nullptr) {
      std::fprintf(stderr, "  (checking under LC_NUMERIC=%s)\n", loc);
      CHECK(ExpectLoaded({{"KVSTORE_TIMEOUT_SEC", "2.5"}}).timeout_sec == 2.5);
      ExpectRejected("KVSTORE_TIMEOUT_SEC", "2,5", "[0.001, 10000000] or 0");
      std::setlocale(LC_NUMERIC, "C");
      break;
    }
  }
  return check_summary();
}
