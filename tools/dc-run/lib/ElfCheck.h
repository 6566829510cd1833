//===- ElfCheck.h - is a file a whole shared library? -----------*- C++ -*-===//
//
// dlopen maps a shared library and reads what its headers point at: a file
// cut short (a copy interrupted, a full disk) is a SIGBUS inside dlopen, with
// no message. dc-run reads the headers first and refuses such a file.
//
//===----------------------------------------------------------------------===//
#ifndef DC_RUN_ELFCHECK_H
#define DC_RUN_ELFCHECK_H

#include <cstddef>
#include <string>

namespace dcrun {

/// Checks that the `size` bytes at `data` are a whole 64-bit little-endian
/// ELF shared library: its ELF header, program headers, loaded segments,
/// section headers and sections all lie within them. Returns "" if so, else
/// what is wrong ("truncated: ...", "not an ELF file", ...).
std::string checkSharedLibraryBytes(const unsigned char *data, size_t size);

/// checkSharedLibraryBytes on the file at `path` (mapped, read only);
/// also reports a file that cannot be opened or read.
std::string checkSharedLibraryFile(const std::string &path);

} // namespace dcrun

#endif // DC_RUN_ELFCHECK_H
