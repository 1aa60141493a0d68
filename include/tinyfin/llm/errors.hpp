// Exceptions of libtinyfin-llm. Each derives from tinyfin::Error, so code that catches the
// core's errors catches these too; what() starts with the class name, like the core's.
#pragma once

#include <tinyfin/tinyfin.hpp>

namespace tinyfin::llm {

// The model path cannot be opened or mapped: missing, a directory where a file is needed, a
// FIFO or device, permissions.
class FileError : public Error {
public:
    using Error::Error;
};
// A model file breaks its format: truncated, a length or offset past the end, overlapping or
// unaligned tensors, overflowing sizes, absurd counts, wrong types.
class FormatError : public Error {
public:
    using Error::Error;
};
// A model configuration tinyfin does not implement (an architecture, a config field with a
// non-default value, a tensor type), or one that is inconsistent (head sizes, missing tensors).
class ConfigError : public Error {
public:
    using Error::Error;
};

}  // namespace tinyfin::llm
