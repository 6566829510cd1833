// dc-map-to-gpu sizes its kernels for the module's #dc.target: the blocks
// that fill the GPU (multiprocessors) and the shared memory a block may
// take (sharedMemoryPerBlock). Without a target, the default preset (h200:
// 132 multiprocessors, 48 KiB).
// RUN: dc-opt %s --split-input-file --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s --check-prefix=H200
// RUN: dc-opt %s --split-input-file --dc-attach-target=target=h100 --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s --check-prefix=H200
// RUN: echo '{"base": "h200", "name": "small-gpu", "multiprocessors": 64, "sharedMemoryPerBlock": 40960}' > %t.json
// RUN: dc-opt %s --split-input-file --dc-attach-target=target=%t.json --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s --check-prefix=SMALL
// A target without a GPU's numbers is refused, with its name.
// RUN: not dc-opt %s --split-input-file --dc-attach-target="target=cpu lowering=cuda_sm90" --dc-map-to-gpu=cuda-toolkit=/cuda 2>&1 | FileCheck %s --check-prefix=HOST
// HOST: error: dc-map-to-gpu: target 'cpu' describes no GPU to size kernels for (multiprocessors 0, sharedMemoryPerBlock 0; needed: at least 1, and more than 8192 bytes)

// A short column reduction (512 rows of 2048 f32 columns) takes narrower
// blocks while it has fewer than the GPU's multiprocessors: 16 columns
// (128 blocks of 4 vector lanes) for 132, 32 columns (64 blocks of 8
// vector lanes) for 64.
// H200-LABEL: func.func @short_column_sums
// H200: gpu.launch blocks({{.*}}) in (%{{.*}} = %c128{{.*}}, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}})
// H200: arith.remui %{{.*}}, %c4
// SMALL-LABEL: func.func @short_column_sums
// SMALL: gpu.launch blocks({{.*}}) in (%{{.*}} = %c64{{.*}}, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}})
// SMALL: arith.remui %{{.*}}, %c8
func.func @short_column_sums(%p: memref<512x2048xf32>, %dw: memref<2048xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%p : memref<512x2048xf32>) outs(%dw : memref<2048xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A norm's backward with its weight gradient's partial sums folded in: its
// rows' copies ahead take 34 KiB of shared memory, which 48 KiB leaves room
// for beside the reductions' 8 KiB; 40 KiB does not, and the rows are
// loaded from global memory instead.
// H200-LABEL: func.func @norm_backward_folded
// H200: nvgpu.device_async_copy
// SMALL-LABEL: func.func @norm_backward_folded
// SMALL: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %c4{{.*}}, {{.*}})
// SMALL-NOT: nvgpu.device_async_copy
// SMALL: return
func.func @norm_backward_folded(%dy: memref<64x2048xbf16>, %x: memref<64x2048xbf16>, %r: memref<64xf32>,
                                %w: memref<2048xbf16>, %s: memref<64xf32>, %dx: memref<64x2048xbf16>,
                                %part: memref<4x2048xf32>) {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 3.9e-03 : f32
  %dy3 = memref.expand_shape %dy [[0, 1], [2]] output_shape [4, 16, 2048] : memref<64x2048xbf16> into memref<4x16x2048xbf16>
  %x3 = memref.expand_shape %x [[0, 1], [2]] output_shape [4, 16, 2048] : memref<64x2048xbf16> into memref<4x16x2048xbf16>
  %r2 = memref.expand_shape %r [[0, 1]] output_shape [4, 16] : memref<64xf32> into memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%part : memref<4x2048xf32>)
  linalg.generic {indexing_maps = [affine_map<(k, i, c) -> (k, i, c)>, affine_map<(k, i, c) -> (k, i, c)>,
                                   affine_map<(k, i, c) -> (k, i)>, affine_map<(k, i, c) -> (k, c)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy3, %x3, %r2 : memref<4x16x2048xbf16>, memref<4x16x2048xbf16>, memref<4x16xf32>) outs(%part : memref<4x2048xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %1, %c : f32
    %3 = arith.mulf %0, %2 : f32
    %4 = arith.addf %acc, %3 : f32
    linalg.yield %4 : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<64xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x, %r : memref<64x2048xbf16>, memref<2048xbf16>, memref<64x2048xbf16>, memref<64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16, %d: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.extf %c : bf16 to f32
    %4 = arith.mulf %3, %d : f32
    %5 = arith.mulf %2, %4 : f32
    %6 = arith.addf %acc, %5 : f32
    linalg.yield %6 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : memref<64x2048xbf16>, memref<2048xbf16>, memref<64x2048xbf16>, memref<64xf32>, memref<64xf32>)
      outs(%dx : memref<64x2048xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16, %d: f32, %e: f32, %o: bf16):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.extf %c : bf16 to f32
    %4 = arith.mulf %3, %d : f32
    %5 = arith.mulf %e, %scale : f32
    %6 = arith.mulf %4, %5 : f32
    %7 = arith.subf %2, %6 : f32
    %8 = arith.mulf %d, %7 : f32
    %9 = arith.truncf %8 : f32 to bf16
    linalg.yield %9 : bf16
  }
  return
}
