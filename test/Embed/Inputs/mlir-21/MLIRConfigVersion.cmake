# A stand-in for an installed MLIR 21 (install.test): its version file only.
set(PACKAGE_VERSION "21.1.0")
if(PACKAGE_FIND_VERSION_MAJOR EQUAL 21 AND PACKAGE_FIND_VERSION_MINOR EQUAL 1)
  set(PACKAGE_VERSION_COMPATIBLE 1)
endif()
