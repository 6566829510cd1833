//===- ElfCheck.cpp - is a file a whole shared library? -------------------===//
#include "ElfCheck.h"

#include <cerrno>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace dcrun;

namespace {
/// True if [offset, offset + count * entry) lies within `size` bytes
/// (without overflowing).
bool fits(uint64_t offset, uint64_t count, uint64_t entry, uint64_t size) {
  if (offset > size)
    return false;
  if (entry != 0 && count > (size - offset) / entry)
    return false;
  return true;
}

std::string truncated(const char *what, uint64_t end, size_t size) {
  return "truncated: " + std::string(what) + " end" +
         (end == 0 ? std::string(" past the end of the file")
                   : "s at byte " + std::to_string(end)) +
         ", but the file has " + std::to_string(size) + " bytes";
}
} // namespace

std::string dcrun::checkSharedLibraryBytes(const unsigned char *data,
                                           size_t size) {
  if (size < EI_NIDENT || std::memcmp(data, ELFMAG, SELFMAG) != 0)
    return size < SELFMAG ? "truncated: " + std::to_string(size) +
                                " bytes, too short for an ELF header"
                          : "not an ELF file";
  if (data[EI_CLASS] != ELFCLASS64 || data[EI_DATA] != ELFDATA2LSB)
    return "not a 64-bit little-endian ELF file";
  Elf64_Ehdr header;
  if (size < sizeof(header))
    return truncated("the ELF header", sizeof(header), size);
  std::memcpy(&header, data, sizeof(header));
  if (header.e_type != ET_DYN)
    return "not a shared library (ELF type " + std::to_string(header.e_type) +
           ")";
  if (header.e_phnum > 0 && header.e_phentsize != sizeof(Elf64_Phdr))
    return "bad program header size " + std::to_string(header.e_phentsize);
  if (!fits(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr), size))
    return truncated("the program headers", 0, size);
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment;
    std::memcpy(&segment, data + header.e_phoff + i * sizeof(segment),
                sizeof(segment));
    if (!fits(segment.p_offset, 1, segment.p_filesz, size))
      return truncated(("segment " + std::to_string(i)).c_str(),
                       segment.p_offset + segment.p_filesz, size);
  }
  if (header.e_shoff == 0)
    return "";
  if (header.e_shnum > 0 && header.e_shentsize != sizeof(Elf64_Shdr))
    return "bad section header size " + std::to_string(header.e_shentsize);
  if (!fits(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr), size))
    return truncated("the section headers", 0, size);
  for (unsigned i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    std::memcpy(&section, data + header.e_shoff + i * sizeof(section),
                sizeof(section));
    if (section.sh_type != SHT_NOBITS &&
        !fits(section.sh_offset, 1, section.sh_size, size))
      return truncated(("section " + std::to_string(i)).c_str(),
                       section.sh_offset + section.sh_size, size);
  }
  return "";
}

std::string dcrun::checkSharedLibraryFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return std::strerror(errno);
  struct stat info;
  if (fstat(fd, &info) != 0) {
    std::string error = std::strerror(errno);
    ::close(fd);
    return error;
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return "not a regular file";
  }
  size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) {
    ::close(fd);
    return "truncated: the file is empty";
  }
  void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return std::strerror(errno);
  std::string error =
      checkSharedLibraryBytes(static_cast<const unsigned char *>(map), size);
  munmap(map, size);
  return error;
}
