//===- DCDialect.cpp - dc dialect, types and attributes -------------------===//
#include "dc/Dialect/DC/IR/DCDialect.h"

#include "dc/Dialect/DC/IR/TypeSizes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace dc;

#include "dc/Dialect/DC/IR/DCDialect.cpp.inc"
#include "dc/Dialect/DC/IR/DCInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dc/Dialect/DC/IR/DCAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dc/Dialect/DC/IR/DCTypes.cpp.inc"

void DCDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dc/Dialect/DC/IR/DCTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dc/Dialect/DC/IR/DCAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dc/Dialect/DC/IR/DCOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

LogicalResult ShardType::verify(function_ref<InFlightDiagnostic()> emitError,
                                RankedTensorType logical,
                                FlatSymbolRefAttr grid, ArrayRef<int64_t> axes,
                                int64_t local) {
  if (!logical.hasStaticShape())
    return emitError() << "shard of a dynamically shaped tensor " << logical
                       << " (dc needs static shapes)";
  // Shard sizes are counted in bytes of int or float elements.
  if (!logical.getElementType().isIntOrFloat())
    return emitError() << "shard element type must be an integer or float, "
                          "got "
                       << logical.getElementType();
  // Sizes are int64_t element and byte counts; they must not wrap.
  int64_t totalBytes = getElementBytes(logical.getElementType());
  for (int64_t dim : logical.getShape())
    if (llvm::MulOverflow(totalBytes, dim, totalBytes))
      return emitError() << logical << " is too large: its size in bytes "
                         << "overflows int64_t";
  // A shard holds at least one element, so an empty tensor has no valid
  // local size; leave such tensors replicated.
  if (logical.getNumElements() == 0)
    return emitError() << "cannot shard " << logical
                       << ", which has no elements";
  if (axes.empty())
    return emitError() << "shard must name at least one grid axis";
  for (auto [i, axis] : llvm::enumerate(axes)) {
    if (axis < 0)
      return emitError() << "grid axis must be non-negative, got " << axis;
    // One spelling per group: increasing, each axis once.
    if (i > 0 && axis <= axes[i - 1])
      return emitError() << "grid axes must be increasing, each named once; "
                         << "got " << axes[i - 1] << " before " << axis;
  }
  if (local < 1)
    return emitError() << "local size must be positive, got " << local;
  if (local > logical.getNumElements())
    return emitError() << "local size " << local << " exceeds the tensor's "
                       << logical.getNumElements() << " elements";
  return success();
}

RankedTensorType ShardType::getLocalTensorType() const {
  return RankedTensorType::get({getLocal()}, getElementType());
}

int64_t ShardType::getLocalBytes() const { return getTypeBytes(*this); }

int64_t ShardType::getGroupAxis() const {
  return getAxes().size() == 1 ? getAxes().front() : kAllGridAxes;
}

static bool isDeviceValueType(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return (tensor && tensor.hasStaticShape()) || isa<ShardType>(type);
}

/// A statically shaped identity-layout memref in memory space `space`.
static bool isDenseBuffer(Type type, Attribute space) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.hasStaticShape() && memref.getLayout().isIdentity() &&
         memref.getMemorySpace() == space;
}

bool dc::isDeviceBuffer(Type type) { return isDenseBuffer(type, {}); }

bool dc::isStridedDeviceBuffer(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.hasStaticShape() && memref.isStrided() &&
         !memref.getMemorySpace();
}

bool dc::hasStridedRows(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape() || memref.getMemorySpace() ||
      memref.getRank() < 1)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(memref.getStridesAndOffset(strides, offset)))
    return false;
  ArrayRef<int64_t> shape = memref.getShape();
  int64_t dense = 1;
  for (int64_t dim = memref.getRank() - 1; dim >= 1; --dim) {
    if (strides[dim] != dense && shape[dim] != 1)
      return false;
    dense *= shape[dim];
  }
  return !ShapedType::isDynamic(strides[0]) &&
         (strides[0] >= dense || shape[0] == 1);
}

int64_t dc::getRowStride(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (type.getRank() < 1 || failed(type.getStridesAndOffset(strides, offset)))
    return 1;
  // A single row's stride is never used: report the dense one.
  if (type.getShape()[0] == 1)
    return type.getNumElements();
  return strides[0];
}

bool dc::isHostBuffer(Type type) {
  return isDenseBuffer(type, HostMemoryAttr::get(type.getContext()));
}

Type dc::getHostValueType(Type device) {
  if (auto memref = dyn_cast<MemRefType>(device))
    return MemRefType::get(memref.getShape(), memref.getElementType(),
                           MemRefLayoutAttrInterface(),
                           HostMemoryAttr::get(device.getContext()));
  return HostType::get(device);
}

Type dc::getDeviceValueType(Type host) {
  if (auto memref = dyn_cast<MemRefType>(host))
    return MemRefType::get(memref.getShape(), memref.getElementType());
  return cast<HostType>(host).getValue();
}

LogicalResult HostType::verify(function_ref<InFlightDiagnostic()> emitError,
                               Type value) {
  if (!isDeviceValueType(value))
    return emitError() << "host value must be a statically shaped tensor or "
                          "a !dc.shard, got "
                       << value;
  return success();
}

LogicalResult FutureType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 Type value) {
  if (!isDeviceValueType(value) && !isa<HostType>(value) &&
      !isDeviceBuffer(value) && !isHostBuffer(value))
    return emitError() << "future must hold a statically shaped tensor, a "
                          "!dc.shard, a !dc.host value or a statically shaped "
                          "identity-layout memref, got "
                       << value;
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t id, StringAttr name) {
  if (id < 0)
    return emitError() << "parameter id must be non-negative, got " << id;
  if (name && name.getValue().empty())
    return emitError() << "parameter name must not be empty; omit it instead";
  return success();
}

LogicalResult GradAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t param) {
  if (param < 0)
    return emitError() << "gradient must name a non-negative parameter id, "
                          "got "
                       << param;
  return success();
}

//===----------------------------------------------------------------------===//
// Argument attributes
//===----------------------------------------------------------------------===//

LogicalResult DCDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attribute) {
  if (attribute.getName() != kNameAttrName)
    return success();
  auto name = dyn_cast<StringAttr>(attribute.getValue());
  if (!name || name.getValue().empty())
    return op->emitOpError()
           << "argument #" << argIndex << ": " << kNameAttrName
           << " must be a non-empty string, got " << attribute.getValue();
  // The other arguments' attributes are the function's.
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function || regionIndex != 0)
    return success();
  if (function.getArgAttr(argIndex, kParamAttrName))
    return op->emitOpError()
           << "argument #" << argIndex << ": " << kNameAttrName
           << " on a parameter; a parameter is named by its #dc.param";
  for (unsigned other = 0; other < argIndex; ++other)
    if (function.getArgAttr(other, kNameAttrName) == name)
      return op->emitOpError()
             << "arguments #" << other << " and #" << argIndex
             << " have the same " << kNameAttrName << " " << name;
  return success();
}

//===----------------------------------------------------------------------===//
// Grid helpers
//===----------------------------------------------------------------------===//

FailureOr<int64_t> dc::getGridAxisSize(Operation *from, FlatSymbolRefAttr grid,
                                       int64_t axis,
                                       SymbolTableCollection &symbols) {
  auto gridOp =
      symbols.lookupNearestSymbolFrom<shard::GridOp>(from, grid.getAttr());
  if (!gridOp)
    return from->emitOpError() << "refers to grid " << grid
                               << ", which is not a shard.grid in scope";
  ArrayRef<int64_t> shape = gridOp.getShape();
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return from->emitOpError() << "grid " << grid << " has " << shape.size()
                               << " axes; axis " << axis << " does not exist";
  if (ShapedType::isDynamic(shape[axis]))
    return from->emitOpError() << "axis " << axis << " of grid " << grid
                               << " is dynamic; dc needs the world size at "
                                  "compile time";
  // shard.grid takes 0 (and other sizes no job has): nothing divides by it.
  if (shape[axis] < 1)
    return from->emitOpError()
           << "axis " << axis << " of grid " << grid << " has " << shape[axis]
           << " ranks; dc needs at least 1";
  return shape[axis];
}

FailureOr<int64_t> dc::getShardGroupSize(Operation *from, ShardType shard,
                                         SymbolTableCollection &symbols) {
  int64_t ranks = 1;
  for (int64_t axis : shard.getAxes()) {
    FailureOr<int64_t> size =
        getGridAxisSize(from, shard.getGrid(), axis, symbols);
    if (failed(size))
      return failure();
    ranks *= *size;
  }
  // The runtime has a communicator per axis and one for the whole grid:
  // a shard over several axes must span all of them.
  if (shard.getAxes().size() > 1) {
    auto gridOp = symbols.lookupNearestSymbolFrom<mlir::shard::GridOp>(
        from, shard.getGrid().getAttr());
    if (shard.getAxes().size() != gridOp.getShape().size())
      return from->emitOpError()
             << "shard " << shard << " is split over " << shard.getAxes().size()
             << " of the " << gridOp.getShape().size() << " axes of grid "
             << shard.getGrid()
             << "; a shard is split over one axis or every axis of its grid";
  }
  return ranks;
}

LogicalResult dc::verifyShardAgainstGrid(Operation *op, Type type,
                                         SymbolTableCollection &symbols) {
  if (auto future = dyn_cast<FutureType>(type))
    type = future.getValue();
  if (auto host = dyn_cast<HostType>(type))
    type = host.getValue();
  auto shard = dyn_cast<ShardType>(type);
  if (!shard)
    return success();
  FailureOr<int64_t> parts = getShardGroupSize(op, shard, symbols);
  if (failed(parts))
    return failure();
  int64_t expected =
      shardLocalSize(shard.getLogical().getNumElements(), *parts);
  if (shard.getLocal() != expected)
    return op->emitOpError()
           << "shard " << shard << " has local size " << shard.getLocal()
           << " but ceil(" << shard.getLogical().getNumElements() << " / "
           << *parts << ") = " << expected;
  return success();
}
