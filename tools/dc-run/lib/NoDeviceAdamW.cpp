//===- NoDeviceAdamW.cpp - dc-run built without CUDA ----------------------===//
#include "Params.h"

/// No device AdamW in this build: createAdamW falls back to HostAdamW.
std::unique_ptr<dcrun::Optimizer>
dcrun::createDeviceAdamW(const AdamWConfig &) {
  return nullptr;
}
