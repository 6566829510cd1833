/*===- dc-embed-c.c - dc's pipelines through the C API --------------------===*\
|*                                                                            *|
|* Usage: dc-embed-c INPUT.mlir [ZERO3-OPTIONS [LOWERING-OPTIONS]]           *|
|*        dc-embed-c INPUT.mlir --compile COMPILE-OPTIONS                     *|
|*                                                                            *|
|* The second form adds both pipelines at once (dcAddCompilePipeline), with *|
|* their options in one string as dc-compile takes them.                     *|
|*                                                                            *|
|* dc-embed (the C++ example) in C: MLIR's C API for the context, parser,    *|
|* pass manager and printer; dc's C API for the dialects and pipelines.      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include "dc-c/Dialects.h"
#include "dc-c/Passes.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void printTo(MlirStringRef text, void *file) {
  fwrite(text.data, 1, text.length, (FILE *)file);
}

/* The whole file, NUL-terminated; NULL if it cannot be read. */
static char *readFile(const char *path, size_t *length) {
  FILE *file = fopen(path, "rb");
  if (!file)
    return NULL;
  char *text = NULL;
  size_t size = 0, capacity = 0, got;
  do {
    if (size + 4096 + 1 > capacity) {
      capacity = 2 * capacity + 4096 + 1;
      char *grown = realloc(text, capacity);
      if (!grown) {
        free(text);
        fclose(file);
        return NULL;
      }
      text = grown;
    }
    got = fread(text + size, 1, 4096, file);
    size += got;
  } while (got == 4096);
  fclose(file);
  text[size] = '\0';
  *length = size;
  return text;
}

/* Adds the pipelines: dc-zero3-pipeline with `zero3` and dc-lower-to-llvm
 * with `lowering`, or (`lowering` NULL) dc-compile-pipeline with `zero3`. */
static MlirLogicalResult addPipelines(MlirOpPassManager pm, const char *zero3,
                                      const char *lowering) {
  if (!lowering)
    return dcAddCompilePipeline(pm, mlirStringRefCreateFromCString(zero3),
                                printTo, stderr);
  if (mlirLogicalResultIsFailure(dcAddZero3Pipeline(
          pm, mlirStringRefCreateFromCString(zero3), printTo, stderr)))
    return mlirLogicalResultFailure();
  return dcAddLowerToLLVMPipeline(pm, mlirStringRefCreateFromCString(lowering),
                                  printTo, stderr);
}

/* Schedules and lowers `module`'s text and prints the result; 0 on success.
 * Errors (parser, options, passes) are printed to stderr. */
static int compile(MlirContext context, MlirStringRef source, const char *zero3,
                   const char *lowering) {
  MlirModule module = mlirModuleCreateParse(context, source);
  if (mlirModuleIsNull(module))
    return 1;
  MlirPassManager pm = mlirPassManagerCreate(context);
  MlirOpPassManager modulePm = mlirPassManagerGetAsOpPassManager(pm);
  MlirOperation op = mlirModuleGetOperation(module);
  int status = 1;
  if (mlirLogicalResultIsFailure(addPipelines(modulePm, zero3, lowering))) {
    fprintf(stderr, "\nbad pipeline options\n");
  } else if (mlirLogicalResultIsSuccess(mlirPassManagerRunOnOp(pm, op))) {
    mlirOperationPrint(op, printTo, stdout);
    printf("\n");
    status = 0;
  }
  mlirPassManagerDestroy(pm);
  mlirModuleDestroy(module);
  return status;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr,
            "usage: %s INPUT.mlir [ZERO3-OPTIONS [LOWERING-OPTIONS]]\n"
            "       %s INPUT.mlir --compile COMPILE-OPTIONS\n",
            argv[0], argv[0]);
    return 2;
  }
  size_t length = 0;
  char *source = readFile(argv[1], &length);
  if (!source) {
    fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[1]);
    return 1;
  }

  /* A context with what dc's pipelines need; the dc dialect is loaded
   * through its dialect handle, as any MLIR C API dialect is. */
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  dcRegisterDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirDialectHandleLoadDialect(mlirGetDialectHandle__dc__(), context);

  /* --compile: one string of both pipelines' options. */
  const char *zero3 = argc > 2 ? argv[2] : "";
  const char *lowering = argc > 3 ? argv[3] : "";
  if (argc == 4 && strcmp(argv[2], "--compile") == 0) {
    zero3 = argv[3];
    lowering = NULL;
  }
  int status =
      compile(context, mlirStringRefCreate(source, length), zero3, lowering);
  mlirContextDestroy(context);
  free(source);
  return status;
}
