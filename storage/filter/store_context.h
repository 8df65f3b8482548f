// StoreContext: what every StoredFilter of one store shares (the database, the memory budget,
// the clock, the checkpoint schedule, the idle touches of a replica, the write pacer), held by
// pointer in each filter: one pointer instead of several, for millions of small filters.
//
// Thread-safety: the pointers are set before any filter is made and never change; what they
// point to states its own.
#ifndef STORAGE_FILTER_STORE_CONTEXT_H_
#define STORAGE_FILTER_STORE_CONTEXT_H_

#include <atomic>
#include <cstdint>

#include "common/clock.h"
#include "storage/db/database.h"
#include "storage/memory/idle_touches.h"
#include "storage/memory/memory_budget.h"
#include "storage/write/write_pacer.h"

namespace storage {

class JournalHolds;

class CheckpointSchedule;

// What every filter of one store shares; the store owns it and outlives its filters. One
// pointer in each filter instead of two, for millions of small filters.
struct StoreContext {
  Database* db = nullptr;
  MemoryBudget* budget = nullptr;
  std::atomic<uint64_t>* slices_retired = nullptr;  // counts the slices checkpoints retire
  // Ages idle_ttl (a window ages by its filter's clock, which is this one too).
  const bloomtime::Clock* clock = bloomtime::Clock::Real();
  // Told of each filter's first change since its last checkpoint (may be null: nobody asks).
  CheckpointSchedule* schedule = nullptr;
  // On a replica: told when a filter with an idle_ttl is used (idle_touches.h); else null.
  IdleTouches* idle_touches = nullptr;
  // Paces the background checkpointer's page writes (write_pacer.h); null: unpaced.
  WritePacer* pacer = nullptr;
  // The store's StoreOptions::sync: how writes outside a group commit's batch sync (the record
  // of a Bloom filter's new sub-filter, which its add opens before the batch is written).
  bool sync = false;
  // Journals a slot move is reading: checkpoints trim them only up to their holds (may be
  // null: none).
  const JournalHolds* journal_holds = nullptr;
};

}  // namespace storage

#endif  // STORAGE_FILTER_STORE_CONTEXT_H_
