// Reading and writing safetensors files (Hugging Face's tensor format), for
// model checkpoints. The format:
//
//   8 bytes   N, little-endian u64: the header's length
//   N bytes   UTF-8 JSON object: {"name": {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
//             (the writer pads it with spaces to a multiple of 8 bytes, so
//             that the data starts 8-byte aligned)
//   the rest  the tensors' bytes, little-endian, row-major, offsets relative
//             to the first byte after the header
//
// load() accepts exactly what the reference implementation accepts, and says
// why it refuses anything else: the data offsets, sorted, must tile the data
// region from 0 to its end with no gap, overlap or trailing byte (so a file
// never holds bytes no tensor owns); each tensor's byte count must be
// product(shape) x the dtype's size (an empty tensor, a dimension of 0, owns
// no bytes; a 0-d tensor, shape [], is one element); names are unique;
// metadata values are strings; the header is at most 100 MB (the reference's
// limit: a header is names and numbers, never data). Unlike the reference,
// entries may not carry keys other than dtype, shape and data_offsets.
//
// The whole file is read into memory: the checkpoints here are small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/runner.hpp"  // mw::UsageError

namespace mw::st {

// A file that is not a valid safetensors file, or lacks what the caller
// expects of it. The message names the file and, where one is involved, the
// tensor. A UsageError: the CLI turns it into exit status 2.
struct FormatError : UsageError {
    using UsageError::UsageError;
};

// The element types this reader knows (the reference's names). Others
// (F8_E4M3, U16, ...) are rejected by name.
enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

std::string_view to_string(DType t);
std::size_t size_of(DType t);  // bytes per element
std::optional<DType> parse_dtype(std::string_view name);

// The header's length is checked against this before anything is parsed.
inline constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct Tensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;  // outermost first; {} is a scalar
    std::vector<std::byte> data;      // little-endian, row-major, exactly numel() * size_of(dtype) bytes

    std::int64_t numel() const;  // product of shape (1 for a scalar)
};

// An F32 tensor holding `values` (whose size must match the shape).
Tensor make_f32(std::string name, std::vector<std::int64_t> shape, std::span<const float> values);

struct File {
    std::map<std::string, std::string> metadata;  // "__metadata__"
    std::vector<Tensor> tensors;                  // load(): in file (offset) order
    std::string source = "<memory>";              // the path it was loaded from, for messages

    const Tensor* find(std::string_view name) const;  // nullptr when absent
};

// The file's bytes. Tensors are laid out largest dtype first, then by name
// (the reference writer's order, which keeps every tensor aligned to its
// element size). Throws FormatError for duplicate or reserved names, a
// negative dimension, or data whose size does not match shape and dtype.
std::string serialize(const File& f);
// Parses and validates a whole file held in memory; `source` names it in messages.
File parse(std::string_view bytes, const std::string& source);

// Writes atomically (a temporary file in the same folder, then a rename).
void save(const std::filesystem::path& path, const File& f);
// Reads and validates; FormatError when the file is missing or malformed.
File load(const std::filesystem::path& path);

// The tensor `name`, checked to exist with this dtype and shape; FormatError
// naming the file, the tensor, what was expected and what was found.
const Tensor& expect(const File& f, const std::string& name, DType dtype, const std::vector<std::int64_t>& shape);
// The same for an F32 tensor, as floats (the data buffer comes from
// operator new, so it is aligned for float).
std::span<const float> expect_f32(const File& f, const std::string& name, const std::vector<std::int64_t>& shape);

// "[2, 3]"
std::string shape_string(const std::vector<std::int64_t>& shape);

}  // namespace mw::st
