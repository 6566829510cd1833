//===- ReloadReleases.h - release reloaded buffers after use ----*- C++ -*-===//
#ifndef DC_SCHEDULE_RELOADRELEASES_H
#define DC_SCHEDULE_RELOADRELEASES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dc {

/// Gives every reloaded value of `fn`'s body exactly one dc.release, right
/// after the top-level op of its last use: of it or of its views (a use
/// inside a nested region counts at its top-level op; a use by a start op,
/// e.g. the dc.gather_start of an uploaded shard, lasts until that start's
/// last dc.wait). A reloaded value with no use is released right after its
/// dc.wait; one that is returned is not released. Idempotent: an existing
/// release moves there (extra ones are erased), so planning passes that
/// move ops may call it again. The memory timeline frees the buffer at the
/// release, and the runtime does too (dcrt_release).
void insertReloadReleases(mlir::func::FuncOp fn);

} // namespace dc

#endif // DC_SCHEDULE_RELOADRELEASES_H
