# Finds what the cuda backend needs: a CUDA toolkit >= 12.4 (FindCUDAToolkit)
# with cuBLASLt (dcrt_matmul) and NCCL (NCCL_ROOT, else the toolkit's
# folders, else the system's). Sets DCRT_CUDA, and says in one line why not
# when something is missing. cuDNN 9 (dcrt_attention_*: cudnn_graph.h and
# libcudnn, CUDNN_ROOT, else the toolkit's folders, else the system's) is
# optional: DCRT_CUDNN says whether it was found; without it the cuda backend
# is built and its attention calls are fatal errors that say so.
set(DCRT_CUDA OFF CACHE INTERNAL "the cuda backend is built")
set(DCRT_CUDNN OFF CACHE INTERNAL "the cuda backend runs attention on cuDNN")
option(DC_ENABLE_CUDA "Build the cuda backend where CUDA and NCCL are found" ON)
if(NOT DC_ENABLE_CUDA)
  message(STATUS "dcrt: DC_ENABLE_CUDA=OFF: building the host backend only")
  return()
endif()
find_package(CUDAToolkit 12.4 QUIET)
if(NOT CUDAToolkit_FOUND)
  message(STATUS "dcrt: no CUDA toolkit >= 12.4 found (set CUDAToolkit_ROOT): "
                 "building the host backend only, without the cuda backend")
  return()
endif()
if(NOT TARGET CUDA::cublasLt)
  message(STATUS "dcrt: CUDA ${CUDAToolkit_VERSION} found but not its cuBLASLt "
                 "library (libcublasLt): building the host backend only, "
                 "without the cuda backend")
  return()
endif()
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
        ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES lib lib64)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(STATUS "dcrt: CUDA ${CUDAToolkit_VERSION} found but not NCCL (set "
                 "NCCL_ROOT): building the host backend only, without the cuda "
                 "backend")
  return()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
enable_language(CUDA)
set(DCRT_CUDA ON CACHE INTERNAL "the cuda backend is built")
message(STATUS "dcrt: cuda backend with CUDA ${CUDAToolkit_VERSION}, NCCL "
               "${NCCL_LIBRARY}")
find_path(CUDNN_INCLUDE_DIR cudnn_graph.h
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
# Some installs (Ubuntu's libcudnn9-cuda-13 without the -dev package) ship
# only the versioned file.
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
  HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
        ${CUDAToolkit_LIBRARY_ROOT}
  PATH_SUFFIXES lib lib64)
if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
  set(DCRT_CUDNN ON CACHE INTERNAL "the cuda backend runs attention on cuDNN")
  message(STATUS "dcrt: fused attention with cuDNN ${CUDNN_LIBRARY}")
else()
  message(STATUS "dcrt: cuDNN 9 not found (cudnn_graph.h and libcudnn; set "
                 "CUDNN_ROOT): dcrt_attention_* on the cuda backend will be "
                 "fatal errors")
endif()
