// node_table.h - what the scheduler tells servers and workers about the job: the servers'
// addresses, in a text form that travels in NODE_TABLE, and node names for messages.
//
// Invariants. ParseTable returns a table only when every server rank appears exactly once
// with 1 to 64 valid ports, and throws PROTOCOL otherwise, so a node never acts on a partial
// table.
#pragma once

#include <string>
#include <vector>

#include "ps/config.h"

namespace kvstore {
namespace dist {

// A server listens on one port per ZeroMQ I/O thread (Config::IoThreads), each bound with
// that thread's affinity, and worker r connects to ports[r mod ports.size()]. ZeroMQ
// otherwise gives each accepted connection to the least loaded I/O thread, and connections
// that arrive together (workers start together) all see the same loads and land on one
// thread, which then receives every worker's stream alone.
struct NodeInfo {
  Role role = Role::kWorker;
  int rank = -1;
  std::string host;
  std::vector<int> ports;  // servers: at least one
};

// "P0,P1,..." <-> ports; parsing fails (false) on anything but 1 to 64 ports in 1..65535.
std::string FormatPorts(const std::vector<int>& ports);
bool ParsePorts(const std::string& text, std::vector<int>* ports);

// "W S\nserver RANK HOST P0[,P1...]\n..." - what workers need to reach the servers.
std::string FormatTable(int num_workers, int num_servers, const std::vector<NodeInfo>& servers);
// Throws PROTOCOL on a malformed table.
void ParseTable(const std::string& text, int* num_workers, int* num_servers,
                std::vector<NodeInfo>* servers);

// Node names for messages: "worker 2", "server 0", "scheduler".
std::string NodeName(Role role, int rank);

}  // namespace dist
}  // namespace kvstore
