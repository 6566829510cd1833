//===- dc-opt.cpp - mlir-opt with the dc dialect and passes
//-----------------===//
#include "dc/Registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  dc::registerDCPassesAndPipelines();
  mlir::DialectRegistry registry;
  dc::registerDCDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dc optimizer driver\n", registry));
}
