//===- Data.h - the step's data arguments, per step and rank --------------===//
//
// Data arguments are batch-sharded on their first dimension: rank r holds
// rows [r B, (r + 1) B) of a global batch of W B rows. Values depend on the
// step and the global row only, so runs on different world sizes with the
// same global batch see the same data. A sequence-sharded argument (dc-ulysses,
// "seq_dim" and "seq_axis" in the manifest) is instead split along its
// sequence dim over the ranks of that grid axis, and batch-sharded over the
// other axes: rank (d, s) holds part s of the sequences of data rank d.
//  - float data: seeded N(0, 1);
//  - integer data: from a token file (the second integer argument is the
//    first shifted by one token: next-token targets), or seeded uniform in
//    [0, vocab).
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_DATA_H
#define DC_RUN_DATA_H

#include "Manifest.h"

#include "dcrt/core.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace dcrun {

class DataSource {
public:
  /// Fatal when integer data has no vocabulary, or the token file is
  /// unusable. `vocab` 0: none given. `gridShape`: the job's grid (empty:
  /// one axis).
  DataSource(const StepSpec &step, uint64_t seed, int64_t vocab,
             const std::string &tokenFile, int rank, int worldSize,
             const std::vector<int64_t> &gridShape = {});

  /// Fills the data arguments' buffers for `step` (counted from 1), through
  /// host staging copies on a device backend. With micro-batches (gradient
  /// accumulation) the step's global batch is `microBatches` times larger
  /// and this fills slice `microBatch` of the rank's part: data rank d's
  /// micro-batch m gets the rows a step with micro-batches times the rows
  /// gives data rank d at [m B, (m + 1) B), so N micro-batches of B rows
  /// see exactly the data of one step of N B rows.
  void fill(int64_t step, int64_t microBatch = 0, int64_t microBatches = 1);
  /// The buffer of argument `index` of the step (a data argument).
  void *buffer(size_t index);

private:
  struct Argument {
    const TensorSpec *spec;
    size_t index;        // in the step's arguments
    int64_t vocab;       // integer data
    int tokenStream;     // -1: synthetic; 0, 1: tokens, shifted by that
    dcrt::Buffer buffer; // device memory: what the entry reads
    /// Where the rank's data sits in the global batch: its data rank and
    /// their count, and for a sequence-sharded argument its part of the
    /// sequence and the number of parts (1: not sharded).
    int64_t dataRank = 0, dataRanks = 1, seqPart = 0, seqParts = 1;
    /// The micro-batch being filled, of how many: slice `micro` of the
    /// rank's rows is a data rank of its own among dataRanks * micros.
    int64_t micro = 0, micros = 1;
    int64_t sliceRank() const { return dataRank * micros + micro; }
    int64_t sliceRanks() const { return dataRanks * micros; }
    /// The global offset of local element i (within the rank's rows for
    /// `inRow`, else of the global batch).
    int64_t globalElement(int64_t i, bool inRow) const;
  };

  void fillFromTokens(Argument &argument, int64_t step);
  void fillSynthetic(Argument &argument, int64_t step);

  uint64_t seed;
  int rank, worldSize;
  std::vector<Argument> arguments;
  std::vector<int32_t> tokens;
};

} // namespace dcrun

#endif // DC_RUN_DATA_H
