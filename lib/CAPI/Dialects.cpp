//===- Dialects.cpp - C API of the dc dialect -----------------------------===//
#include "dc-c/Dialects.h"

#include "dc/Dialect/DC/IR/DCDialect.h"
#include "dc/Registration/Registration.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(DC, dc, dc::DCDialect)

void dcRegisterDialects(MlirDialectRegistry registry) {
  dc::registerDCDialects(*unwrap(registry));
}
