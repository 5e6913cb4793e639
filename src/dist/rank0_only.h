// Rank 0's long work while every other rank waits for it: training the tokenizer (minutes to
// hours on a large corpus), writing a checkpoint to a slow shared file system. Waiting for it
// inside a collective would bound that work by train.dist_timeout_s, whose job is to catch a hung
// or dead rank, not to cap how long a step may take; raising it would delay that catch everywhere.
//
// So the other ranks wait on rank 0's heartbeat in the job's store (dist/rendezvous.h): while it
// works, rank 0 adds 1 to a counter there every second; a waiting rank gives up, with a
// CollectiveError, only when the counter has stood still for train.dist_timeout_s (at least 3
// beats): rank 0's process stopped answering, or its host is gone. A store call has no timeout
// of its own, so the counter is read by a thread of the waiting rank's while the rank itself
// keeps the time. A rank 0 that dies takes the store with it outside torchrun (the next look
// fails at once, with the store's error); under torchrun the agent ends the job. The heartbeat
// shows that rank 0's process answers, not that its work moves: work that hangs (a write to a
// hung NFS mount) keeps the others waiting until the job's own time limit.
//
// Then all_or_none's agreement (dist/all_or_none.h): a failure of `work` stops every rank with
// its reason, "rank 0 stopped while <what>: ...". `work` runs on rank 0 only and must not run
// collectives. In a single process it is just called.
#pragma once
#include <functional>
#include <string>

#include "dist/data_parallel.h"

namespace rpe::dist {

void rank0_only(DataParallel& dp, const std::string& what, const std::function<void()>& work);

}  // namespace rpe::dist
