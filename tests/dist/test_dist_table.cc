// Unit test of the node-table text that carries each server's listening ports (one per
// ZeroMQ I/O thread) from the scheduler to the workers: FormatPorts/ParsePorts and
// FormatTable/ParseTable, including every malformed form the scheduler must reject.
#include <string>
#include <vector>

#include "core/error.h"
#include "ps/node_table.h"
#include "../common/check.h"

using kvstore::dist::FormatPorts;
using kvstore::dist::FormatTable;
using kvstore::dist::NodeInfo;
using kvstore::dist::ParsePorts;
using kvstore::dist::ParseTable;
using kvstore::dist::Role;

namespace {

bool Rejected(const std::string& text) {
  std::vector<int> ports{7};
  const bool ok = ParsePorts(text, &ports);
  return !ok && ports == std::vector<int>{7};  // untouched on failure
}

int TableError(const std::string& text) {
  int w = 0, s = 0;
  std::vector<NodeInfo> servers;
  try {
    ParseTable(text, &w, &s, &servers);
  } catch (const kvstore::Error& e) {
    return e.code();
  }
  return 0;
}

}  // namespace

int main() {
  std::vector<int> ports;
  CHECK(ParsePorts("5000", &ports) && ports == std::vector<int>{5000});
  CHECK(ParsePorts("1,65535,4242", &ports) && (ports == std::vector<int>{1, 65535, 4242}));
  CHECK(FormatPorts({1, 65535, 4242}) == "1,65535,4242");
  std::vector<int> many;
  std::string text;
  for (int i = 1; i <= 64; ++i) {
    many.push_back(1000 + i);
    text += (i > 1 ? "," : "") + std::to_string(1000 + i);
  }
  CHECK(FormatPorts(many) == text);
  CHECK(ParsePorts(text, &ports) && ports == many);
  CHECK(Rejected(text + ",2000"));  // 65 ports: more than a 64-bit affinity mask can name
  for (const char* bad : {"", "0", "65536", "123456", "-1", "+80", "80a", "a", "1,,2", "1,", ",1",
                          " 80", "80 ", "1;2"}) {
    CHECK(Rejected(bad));
  }

  std::vector<NodeInfo> servers(2);
  servers[0] = NodeInfo{Role::kServer, 1, "10.0.0.2", {6001, 6002, 6003}};
  servers[1] = NodeInfo{Role::kServer, 0, "10.0.0.1", {5000}};
  int w = 0, s = 0;
  std::vector<NodeInfo> got;
  ParseTable(FormatTable(3, 2, servers), &w, &s, &got);
  CHECK(w == 3 && s == 2 && got.size() == 2);
  if (got.size() == 2) {  // indexed by rank
    CHECK(got[0].rank == 0 && got[0].host == "10.0.0.1" && got[0].ports == std::vector<int>{5000});
    CHECK(got[1].rank == 1 && got[1].host == "10.0.0.2" &&
          (got[1].ports == std::vector<int>{6001, 6002, 6003}));
  }
  CHECK(TableError("1 1\nserver 0 h 5000,\n") == KV_ERR_PROTOCOL);
  CHECK(TableError("1 1\nserver 0 h 0\n") == KV_ERR_PROTOCOL);
  CHECK(TableError("1 1\nserver 0 h x\n") == KV_ERR_PROTOCOL);
  CHECK(TableError("1 1\nserver 0 h\n") == KV_ERR_PROTOCOL);
  CHECK(TableError("1 2\nserver 0 h 1\nserver 0 h 2\n") == KV_ERR_PROTOCOL);  // rank twice
  CHECK(TableError("1 1\nserver 0 h 5000\n") == 0);
  return check_summary();
}
