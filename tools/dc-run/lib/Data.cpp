//===- Data.cpp - the step's data arguments, per step and rank ------------===//
#include "Data.h"

#include <optional>

#include "HostAccess.h"
#include "Random.h"

#include "dcrt/dtype.hpp"
#include "dcrt/error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

using namespace dcrun;

/// Keeps data values apart from parameter values drawn with the same seed.
constexpr uint64_t dataDomain = 0x64617461; // "data"

/// Rows (first dimension) and elements per row of a data argument.
static void rowsOf(const TensorSpec &spec, int64_t &rows, int64_t &rowNumel) {
  rows = spec.shape.empty() ? 1 : spec.shape[0];
  rowNumel = rows == 0 ? 0 : spec.numel() / rows;
}

static std::vector<int32_t> readTokens(const std::string &path) {
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    dcrt::fatal("cannot open token file '%s': %s", path.c_str(),
                std::strerror(errno));
  std::vector<char> bytes;
  char chunk[1 << 16];
  size_t got;
  while ((got = std::fread(chunk, 1, sizeof(chunk), file)) > 0)
    bytes.insert(bytes.end(), chunk, chunk + got);
  bool failed = std::ferror(file);
  std::fclose(file);
  if (failed)
    dcrt::fatal("cannot read token file '%s'", path.c_str());
  if (bytes.size() % sizeof(int32_t) != 0)
    dcrt::fatal("token file '%s' is not a whole number of int32 tokens "
                "(%zu bytes)",
                path.c_str(), bytes.size());
  std::vector<int32_t> tokens(bytes.size() / sizeof(int32_t));
  if (!bytes.empty()) // memcpy must not get the null of an empty vector
    std::memcpy(tokens.data(), bytes.data(), bytes.size());
  return tokens;
}

DataSource::DataSource(const StepSpec &step, uint64_t seed, int64_t vocab,
                       const std::string &tokenFile, int rank, int worldSize,
                       const std::vector<int64_t> &gridShape)
    : seed(seed), rank(rank), worldSize(worldSize) {
  if (!tokenFile.empty()) {
    tokens = readTokens(tokenFile);
    // Else the run would fall back to synthetic data without a word.
    if (tokens.empty())
      dcrt::fatal("token file '%s' is empty", tokenFile.c_str());
  }
  int integerArguments = 0;
  // The ranks of one sequence-parallel group train on the same rows: every
  // data argument (sequence-sharded or not) splits its batch over the other
  // axes.
  std::optional<int64_t> stepSeqAxis;
  for (const TensorSpec &spec : step.args)
    if (spec.kind == TensorKind::Data && spec.seqAxis)
      stepSeqAxis = spec.seqAxis;
  for (size_t i = 0; i < step.args.size(); ++i) {
    const TensorSpec &spec = step.args[i];
    if (spec.kind != TensorKind::Data)
      continue;
    Argument argument{&spec, i, 0, -1,
                      dcrt::Buffer(spec.numel() * dcrt::dtypeSize(spec.dtype),
                                   dcrt::MemoryKind::Device,
                                   spec.name.c_str())};
    argument.dataRank = rank;
    argument.dataRanks = worldSize;
    if (stepSeqAxis) {
      // The rank's coordinate on the sequence axis, and its linear index
      // over the other axes (row-major, as the runtime's grid).
      std::vector<int64_t> shape = gridShape;
      if (shape.empty())
        shape = {worldSize};
      int64_t axis = *stepSeqAxis, stride = 1;
      for (size_t a = axis + 1; a < shape.size(); ++a)
        stride *= shape[a];
      if (spec.seqAxis && *spec.seqAxis != axis)
        dcrt::fatal("'%s' is sharded over the sequence on grid axis %lld, "
                    "another argument on axis %lld",
                    spec.name.c_str(), static_cast<long long>(*spec.seqAxis),
                    static_cast<long long>(axis));
      if (spec.seqAxis) {
        argument.seqParts = shape[axis];
        argument.seqPart = rank / stride % shape[axis];
      }
      argument.dataRanks = worldSize / shape[axis];
      argument.dataRank =
          rank / (stride * shape[axis]) * stride + rank % stride;
      if (spec.seqDim && *spec.seqDim == 0 && argument.dataRanks > 1)
        dcrt::fatal("'%s' is sharded over the sequence in its first dim and "
                    "over %lld data-parallel ranks; the batch must come "
                    "first",
                    spec.name.c_str(),
                    static_cast<long long>(argument.dataRanks));
    }
    if (!dcrt::isFloatDType(spec.dtype)) {
      // --vocab may narrow the step's own range (dc.vocab), never widen
      // it: ids past the step's vocabulary would index outside its tables.
      if (spec.vocab && vocab > *spec.vocab)
        dcrt::fatal("--vocab %lld exceeds the vocabulary of '%s' (%lld)",
                    static_cast<long long>(vocab), spec.name.c_str(),
                    static_cast<long long>(*spec.vocab));
      argument.vocab = vocab > 0 ? vocab : spec.vocab.value_or(0);
      if (!tokens.empty()) {
        if (integerArguments == 2)
          dcrt::fatal("a token file feeds at most two integer arguments "
                      "(inputs and next-token targets); '%s' is a third",
                      spec.name.c_str());
        argument.tokenStream = integerArguments;
        int64_t rows, rowNumel;
        rowsOf(spec, rows, rowNumel);
        if (spec.seqDim && *spec.seqDim == 0)
          dcrt::fatal("'%s' is sharded over the sequence in its first dim; "
                      "a token file feeds rows of [batch, sequence]",
                      spec.name.c_str());
        rowNumel *= argument.seqParts;
        if (static_cast<int64_t>(tokens.size()) < rowNumel + 2)
          dcrt::fatal("token file '%s' has %zu tokens; '%s' needs at least "
                      "%lld",
                      tokenFile.c_str(), tokens.size(), spec.name.c_str(),
                      static_cast<long long>(rowNumel + 2));
      } else if (argument.vocab <= 0) {
        dcrt::fatal("integer data '%s' needs a range: give --vocab V (the "
                    "manifest has no \"vocab\")",
                    spec.name.c_str());
      }
      ++integerArguments;
    }
    arguments.push_back(std::move(argument));
  }
  if (!tokens.empty() && integerArguments == 0)
    dcrt::fatal("--data '%s' gives tokens, but step '%s' has no integer data "
                "argument to feed them to",
                tokenFile.c_str(), step.name.c_str());
  if (!tokens.empty()) {
    int64_t limit = vocab;
    for (const Argument &argument : arguments)
      if (argument.tokenStream >= 0 && argument.vocab > 0)
        limit = argument.vocab;
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || (limit > 0 && tokens[i] >= limit))
        dcrt::fatal("token %zu of '%s' is %d, outside [0, %lld)", i,
                    tokenFile.c_str(), tokens[i],
                    static_cast<long long>(limit));
  }
}

void *DataSource::buffer(size_t index) {
  for (Argument &argument : arguments)
    if (argument.index == index)
      return argument.buffer.data();
  dcrt::fatal("internal: argument %zu is not data", index);
}

void DataSource::fill(int64_t step, int64_t microBatch, int64_t microBatches) {
  if (microBatches < 1 || microBatch < 0 || microBatch >= microBatches)
    dcrt::fatal("internal: micro-batch %lld of %lld",
                static_cast<long long>(microBatch),
                static_cast<long long>(microBatches));
  for (Argument &argument : arguments) {
    // Micro-batches split the batch, which must be the first dim.
    if (microBatches > 1 && argument.spec->seqDim &&
        *argument.spec->seqDim == 0)
      dcrt::fatal("'%s' is sharded over the sequence in its first dim; "
                  "micro-batches split the batch, which must come first",
                  argument.spec->name.c_str());
    argument.micro = microBatch;
    argument.micros = microBatches;
    if (argument.tokenStream >= 0)
      fillFromTokens(argument, step);
    else
      fillSynthetic(argument, step);
  }
}

void DataSource::fillFromTokens(Argument &argument, int64_t step) {
  const TensorSpec &spec = *argument.spec;
  int64_t rows, rowNumel;
  rowsOf(spec, rows, rowNumel);
  // Row g of the global batch of step s reads the window starting at
  // ((s - 1) G + g) R, wrapped so that the shifted window fits too.
  int64_t globalRows = rows * argument.sliceRanks();
  // A sequence-sharded row is a part of a row of seqParts times its length.
  int64_t globalRowNumel = rowNumel * argument.seqParts;
  int64_t windows = static_cast<int64_t>(tokens.size()) - globalRowNumel - 1;
  int64_t rowBytes = rowNumel * dcrt::dtypeSize(spec.dtype);
  std::vector<int32_t> row(rowNumel);
  writeFromHost(argument.buffer, rows * rowBytes, [&](void *host) {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t global = argument.sliceRank() * rows + r;
      int64_t start =
          (((step - 1) * globalRows + global) * globalRowNumel) % windows +
          argument.tokenStream;
      for (int64_t i = 0; i < rowNumel; ++i)
        row[i] = tokens[start + argument.globalElement(i, /*inRow=*/true)];
      dcrt::convert(row.data(), DCRT_I32,
                    static_cast<char *>(host) + r * rowBytes, spec.dtype,
                    rowNumel);
    }
  });
}

void DataSource::fillSynthetic(Argument &argument, int64_t step) {
  const TensorSpec &spec = *argument.spec;
  int64_t rows, rowNumel;
  rowsOf(spec, rows, rowNumel);
  uint64_t stepKey = dcrun::hashKey(seed, dataDomain, step);
  std::vector<float> values;
  std::vector<int64_t> integers;
  bool isFloat = dcrt::isFloatDType(spec.dtype);
  for (int64_t i = 0; i < rows * rowNumel; ++i) {
    uint64_t element =
        static_cast<uint64_t>(argument.globalElement(i, /*inRow=*/false));
    if (isFloat) {
      values.push_back(static_cast<float>(
          dcrun::standardNormal(stepKey, argument.index, element)));
    } else {
      double u = dcrun::uniformFromKey(
          dcrun::hashKey(stepKey, argument.index, element));
      integers.push_back(std::min<int64_t>(
          static_cast<int64_t>(u * argument.vocab), argument.vocab - 1));
    }
  }
  writeFromHost(argument.buffer, argument.buffer.size(), [&](void *host) {
    if (isFloat)
      dcrt::convert(values.data(), DCRT_F32, host, spec.dtype, values.size());
    else
      dcrt::convert(integers.data(), DCRT_I64, host, spec.dtype,
                    integers.size());
  });
}

int64_t DataSource::Argument::globalElement(int64_t i, bool inRow) const {
  int64_t rows, rowNumel;
  rowsOf(*spec, rows, rowNumel);
  if (seqParts == 1)
    return inRow ? i : sliceRank() * rows * rowNumel + i;
  // Unravel i over the local shape, move the sequence coordinate to the
  // rank's part and the row to the rank's rows, ravel over the global shape.
  const std::vector<int64_t> &shape = spec->shape;
  int64_t seqDim = *spec->seqDim;
  std::vector<int64_t> index(shape.size());
  int64_t rest = i;
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
  }
  index[seqDim] += seqPart * shape[seqDim];
  if (inRow)
    index[0] = 0;
  else if (seqDim != 0)
    index[0] += sliceRank() * shape[0];
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t size = shape[d];
    if (static_cast<int64_t>(d) == seqDim)
      size *= seqParts;
    else if (d == 0)
      size *= sliceRanks();
    flat = flat * size + index[d];
  }
  return flat;
}
