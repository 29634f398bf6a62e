// common.h - transitional: include the specific header. Everything that used to be declared
// here now lives in a header of its own concern:
//   config.h      roles, Config, EnvInt/EnvSeconds, DetectHost
//   log.h         Log, RateLimitedLog, LogDropped
//   clock.h       NowSec, DeadlineAfter
//   wire.h        message types, WireHeader, Message, send/receive, SharedBuf/OutPayload
//   transport.h   Link, ConfigureSocket (and the job's socket topology)
//   node_table.h  NodeInfo, node tables, port lists, NodeName
//   placement.h   StableHash, PartPlan, PlanParts, CheckPartsFit
#pragma once

#include "ps/clock.h"
#include "ps/config.h"
#include "ps/log.h"
#include "ps/node_table.h"
#include "ps/placement.h"
#include "ps/transport.h"
#include "ps/wire.h"
