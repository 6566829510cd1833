# dc's package must reject this MLIR by its version, never load it.
message(FATAL_ERROR "the stand-in MLIR 21 was loaded")
