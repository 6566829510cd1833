/* Usage: dc-capi-textual INPUT.mlir PIPELINE
 * Runs the textual pass pipeline PIPELINE ("builtin.module(dc-...)") on
 * INPUT, with dc's passes registered by name (dcRegisterPasses), and prints
 * the result. */
#include "dc-c/Dialects.h"
#include "dc-c/Passes.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <stdio.h>
#include <stdlib.h>

static void printTo(MlirStringRef text, void *file) {
  fwrite(text.data, 1, text.length, (FILE *)file);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s INPUT.mlir PIPELINE\n", argv[0]);
    return 2;
  }
  FILE *file = fopen(argv[1], "rb");
  if (!file)
    return 1;
  static char source[1 << 20];
  size_t length = fread(source, 1, sizeof(source) - 1, file);
  fclose(file);

  dcRegisterPasses();
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  dcRegisterDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);

  int status = 1;
  MlirModule module =
      mlirModuleCreateParse(context, mlirStringRefCreate(source, length));
  if (!mlirModuleIsNull(module)) {
    MlirPassManager pm = mlirPassManagerCreate(context);
    MlirOperation op = mlirModuleGetOperation(module);
    if (mlirLogicalResultIsSuccess(mlirParsePassPipeline(
            mlirPassManagerGetAsOpPassManager(pm),
            mlirStringRefCreateFromCString(argv[2]), printTo, stderr)) &&
        mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, op))) {
      mlirOperationPrint(op, printTo, stdout);
      printf("\n");
      status = 0;
    }
    mlirPassManagerDestroy(pm);
    mlirModuleDestroy(module);
  }
  mlirContextDestroy(context);
  return status;
}
