//===- UnitTestMain.cpp - single-process tests with the runtime up
//---------===//
//
// The parameter registry allocates through libdcrt, so the tests run inside
// a one-rank job (an MPI singleton). A death test's forked child must not
// abort that job (MPI_Abort would end this process too): its fatal errors
// exit the child alone.
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

#include "dcrt/dcrt.h"

#include <gtest/gtest.h>

#include <unistd.h>

namespace {
pid_t testProcess;

void exitForkedChild() {
  if (getpid() != testProcess)
    _exit(1);
}
} // namespace

int main(int argc, char **argv) {
  testing::InitGoogleTest(&argc, argv);
  dcrt_init_options options{};
  options.struct_size = sizeof(options); // any world size, no plan
  dcrt_init(&options);
  testProcess = getpid();
  dcrt::detail::setAbortHook(exitForkedChild);
  int failed = RUN_ALL_TESTS();
  dcrt_finalize();
  return failed;
}
