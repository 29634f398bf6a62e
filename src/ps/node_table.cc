// node_table.cc - node tables, port lists and node names (node_table.h).
#include "ps/node_table.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace kvstore {
namespace dist {

std::string FormatPorts(const std::vector<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

bool ParsePorts(const std::string& text, std::vector<int>* ports) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size() && out.size() < 64) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    if (item.empty() || item.size() > 5 || item.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    const int p = std::atoi(item.c_str());
    if (p <= 0 || p > 65535) return false;
    out.push_back(p);
    pos = comma + 1;
  }
  if (pos <= text.size()) return false;  // more than 64 ports
  *ports = std::move(out);
  return true;
}

std::string FormatTable(int num_workers, int num_servers, const std::vector<NodeInfo>& servers) {
  std::ostringstream os;
  os << num_workers << ' ' << num_servers << '\n';
  for (const auto& s : servers) {
    os << "server " << s.rank << ' ' << s.host << ' ' << FormatPorts(s.ports) << '\n';
  }
  return os.str();
}

void ParseTable(const std::string& text, int* num_workers, int* num_servers,
                std::vector<NodeInfo>* servers) {
  std::istringstream is(text);
  int w = 0, s = 0;
  KV_CHECK((is >> w >> s) && w > 0 && s > 0 && s <= 100000, KV_ERR_PROTOCOL,
           "malformed node table header");
  std::vector<NodeInfo> out(static_cast<size_t>(s));
  std::vector<bool> seen(static_cast<size_t>(s), false);
  for (int i = 0; i < s; ++i) {
    std::string tag, ports;
    NodeInfo n;
    n.role = Role::kServer;
    KV_CHECK((is >> tag >> n.rank >> n.host >> ports) && tag == "server" && n.rank >= 0 &&
                 n.rank < s && !seen[static_cast<size_t>(n.rank)] && ParsePorts(ports, &n.ports),
             KV_ERR_PROTOCOL, "malformed node table entry %d", i);
    seen[static_cast<size_t>(n.rank)] = true;
    out[static_cast<size_t>(n.rank)] = n;
  }
  *num_workers = w;
  *num_servers = s;
  *servers = std::move(out);
}

std::string NodeName(Role role, int rank) {
  if (role == Role::kScheduler) return "scheduler";
  return std::string(RoleName(role)) + " " + std::to_string(rank);
}

}  // namespace dist
}  // namespace kvstore
