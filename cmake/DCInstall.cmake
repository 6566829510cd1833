# `cmake --install` for dc: headers, libraries, tools and the CMake package
# that lets another project write
#
#   find_package(dc CONFIG REQUIRED)   # finds MLIR 22 itself
#   target_link_libraries(mycc PRIVATE dc::DCRegistration dc::DCPipelines)
#
# Included last by the top level (and by the runtime-only build, which
# installs libdcrt, its headers and dc-run only). The layout is the usual
# one: bin/, include/{dc,dc-c,dcrt}/, lib/, lib/cmake/dc/ and share/dc/.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DC_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dc)

# dc's C++ libraries, in link order (each may use those after it). Static:
# embedders link them into their own executables or shared libraries.
set(DC_INSTALL_MLIR_LIBS DCRegistration DCPipelines DCZero3Pipeline DCTarget
    DCGPU DCLowering DCSchedule DCRewrite DCAnalysis DCBufferization DCDialect
    DCTargetDescription DCSupport)

if(NOT DC_RUNTIME_ONLY)
  # A host that is itself a shared library (a Python extension, a plugin),
  # and DCCAPI below, link these archives: position-independent code.
  set_target_properties(${DC_INSTALL_MLIR_LIBS} PROPERTIES
    POSITION_INDEPENDENT_CODE ON)
  set(DC_INSTALL_LIBS ${DC_INSTALL_MLIR_LIBS} DCCAPI dcrt)
  set(DC_INSTALL_SHARED DCCAPI dcrt)
  set(DC_INSTALL_TOOLS dc-opt dc-compile dc-run)
else()
  set(DC_INSTALL_LIBS dcrt)
  set(DC_INSTALL_SHARED dcrt)
  set(DC_INSTALL_TOOLS dc-run)
endif()

# Installed binaries find libdcrt beside them (../lib) and libMLIR, CUDA and
# NCCL where they were found at build time.
set_target_properties(${DC_INSTALL_SHARED} ${DC_INSTALL_TOOLS} PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
  INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS ${DC_INSTALL_LIBS} EXPORT dcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ${DC_INSTALL_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# libdcrt's C ABI (dcrt.h, what compiled artifacts call) and its C++ API.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/dcrt
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
# dcrt/assert.hpp's setting, generated at configure time.
install(FILES ${PROJECT_BINARY_DIR}/runtime/include/dcrt/assert-config.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dcrt)

if(NOT DC_RUNTIME_ONLY)
  install(PROGRAMS ${DC_TOOLS_DIR}/dc-gen-llama
    DESTINATION ${CMAKE_INSTALL_BINDIR})
  # dc-gen-llama imports dc_mlir from ../share/dc/python (the default
  # bindir and datadir).
  install(FILES ${PROJECT_BINARY_DIR}/share/dc/python/dc_mlir.py
    DESTINATION ${CMAKE_INSTALL_DATADIR}/dc/python)
  # Headers (and ODS, for projects that extend the dialect) from the source
  # tree, the generated .inc files from the build tree: one include/dc/.
  foreach(dir ${PROJECT_SOURCE_DIR}/include/dc
              ${PROJECT_BINARY_DIR}/include/dc)
    install(DIRECTORY ${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      FILES_MATCHING PATTERN "*.h" PATTERN "*.inc" PATTERN "*.td"
      PATTERN CMakeFiles EXCLUDE)
  endforeach()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dc-c
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
  # The package re-finds the MLIR dc was built with: the same major.minor
  # (libMLIR.so.22.1), searched first where it was found here.
  set(DC_MLIR_VERSION ${LLVM_VERSION_MAJOR}.${LLVM_VERSION_MINOR})
  set(DC_MLIR_FULL_VERSION ${LLVM_PACKAGE_VERSION})
  set(DC_MLIR_DIR ${MLIR_DIR})
  set(DC_MLIR_RTTI ${LLVM_ENABLE_RTTI})
endif()

install(EXPORT dcTargets NAMESPACE dc:: DESTINATION ${DC_INSTALL_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/dcConfig.cmake
  INSTALL_DESTINATION ${DC_INSTALL_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/dcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/dcConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/dcConfigVersion.cmake
  DESTINATION ${DC_INSTALL_CMAKE_DIR})
