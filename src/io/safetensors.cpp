// The safetensors reader and writer (layout in weft/io/safetensors.h). The header is built and
// parsed with nlohmann-json; the loader checks sizes, offsets and shapes before copying any
// data, and every error names the file and, where one is at fault, the tensor.
#include "weft/io/safetensors.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "weft/core/error.h"
#include "weft/io/input_limits.h"
#include "weft/io/json_lines.h"

namespace weft::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

using Json = nlohmann::json;

constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

// The format's dtype names for the dtypes a Tensor can have.
constexpr std::pair<DType, const char*> kDTypeTags[] = {{DType::kFloat32, "F32"},
                                                        {DType::kInt32, "I32"},
                                                        {DType::kFloat64, "F64"},
                                                        {DType::kInt64, "I64"},
                                                        {DType::kBool, "BOOL"}};

const char* dtype_tag(DType dtype) {
  for (const auto& [d, tag] : kDTypeTags)
    if (d == dtype) return tag;
  return "?";
}

std::string header_json(const TensorMap& tensors, const Metadata& metadata,
                        const std::string& path) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__")
      fail("safetensors", "cannot save '", path, "': invalid tensor name '", name, "'");
    if (!tensor.defined())
      fail("safetensors", "cannot save '", path, "': tensor '", name, "' is undefined");
    std::vector<std::int64_t> shape(tensor.shape().dims().begin(), tensor.shape().dims().end());
    const std::uint64_t bytes = tensor.nbytes();
    header[name] = {{"dtype", dtype_tag(tensor.dtype())},
                    {"shape", shape},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // pad so the data starts 8-byte aligned
  return text;
}

void write_all(int fd, const void* data, std::size_t bytes, const std::string& temp) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("safetensors", "writing '", temp, "' failed: ", std::strerror(errno));
    p += n;
    bytes -= std::size_t(n);
  }
}

void write_file(int fd, const std::string& temp, const std::string& header,
                const TensorMap& tensors) {
  const std::uint64_t length = header.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));
  write_all(fd, prefix, 8, temp);
  write_all(fd, header.data(), header.size(), temp);
  for (const auto& entry : tensors) {
    const Tensor host = entry.second.to(Device::kCpu);
    write_all(fd, host.raw_data(), host.nbytes(), temp);
  }
  if (::fsync(fd) != 0) fail("safetensors", "flushing '", temp, "' failed: ", std::strerror(errno));
}

// The temporary file of a save is "<path>.tmp-<pid>-XXXXXX". A save killed before its rename
// leaves one behind; the next save of the same path removes those whose process is gone.
std::string temp_prefix(const std::string& path) { return path + ".tmp-"; }

void remove_stale_temporaries(const std::string& path) {
  const std::filesystem::path target(path);
  const std::filesystem::path folder =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  const std::string prefix = target.filename().string() + ".tmp-";
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const std::size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || rest.size() - dash != 7) continue;
    long pid = 0;
    const auto [end_of_pid, ec] = std::from_chars(rest.data(), rest.data() + dash, pid);
    if (ec != std::errc() || end_of_pid != rest.data() + dash || pid <= 0) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code ignored;
    std::filesystem::remove(it->path(), ignored);
  }
}

}  // namespace

void save_safetensors(const std::string& path, const TensorMap& tensors, const Metadata& metadata) {
  const std::string header = header_json(tensors, metadata, path);
  remove_stale_temporaries(path);
  std::string temp = temp_prefix(path) + std::to_string(::getpid()) + "-XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0)
    fail("safetensors", "cannot save '", path,
         "': creating a temporary file beside it failed: ", std::strerror(errno));
  try {
    // mkstemp creates the file 0600; give it the mode an ordinary new file would have.
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::fchmod(fd, 0666 & ~mask) != 0)
      fail("safetensors", "setting the mode of '", temp, "' failed: ", std::strerror(errno));
    write_file(fd, temp, header, tensors);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  const bool closed = ::close(fd) == 0;
  if (!closed || std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    fail("safetensors", "cannot save '", path, "': ", closed ? "renaming" : "closing",
         " the temporary file failed: ", std::strerror(error));
  }
}

namespace {

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

std::uint64_t read_u64(const Json& value, const std::string& path, const std::string& name,
                       const char* field) {
  if (!value.is_number_unsigned())
    fail("safetensors", "'", path, "': tensor '", name, "': ", field,
         " must hold non-negative integers, got ", json_excerpt(value));
  return value.get<std::uint64_t>();
}

Entry parse_entry(const std::string& name, const Json& info, const std::string& path) {
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
      !info.contains("data_offsets"))
    fail("safetensors", "'", path, "': tensor '", name,
         "' needs an object with dtype, shape and data_offsets, got ", json_excerpt(info));
  Entry e{name, DType::kFloat32, Shape{}, 0, 0};
  const Json& dtype = info["dtype"];
  bool known = false;
  for (const auto& [d, tag] : kDTypeTags) {
    if (dtype == tag) {
      e.dtype = d;
      known = true;
    }
  }
  if (!known)
    fail("safetensors", "'", path, "': tensor '", name, "' has dtype ", json_excerpt(dtype),
         "; only F32, F64, I32, I64 and BOOL are supported");
  const Json& shape = info["shape"];
  if (!shape.is_array() || shape.size() > std::size_t(Shape::kMaxRank))
    fail("safetensors", "'", path, "': tensor '", name, "' shape must be an array of at most ",
         Shape::kMaxRank, " extents, got ", json_excerpt(shape));
  std::vector<std::int64_t> dims;
  std::uint64_t numel = 1;
  for (const Json& extent : shape) {
    const std::uint64_t d = read_u64(extent, path, name, "shape");
    if (d > (std::uint64_t(1) << 40) || (d != 0 && numel > (std::uint64_t(1) << 62) / d))
      fail("safetensors", "'", path, "': tensor '", name, "' shape ", json_excerpt(shape),
           " is too large");
    numel *= d;
    dims.push_back(std::int64_t(d));
  }
  if (numel > std::uint64_t(input_limits().max_tensor_elements))
    fail("safetensors", "'", path, "': tensor '", name, "' has ", numel, " elements ",
         limit_hint("max_tensor_elements"));
  e.shape = Shape(std::span<const std::int64_t>(dims));
  const Json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail("safetensors", "'", path, "': tensor '", name, "' data_offsets must be [begin, end], got ",
         json_excerpt(offsets));
  e.begin = read_u64(offsets[0], path, name, "data_offsets");
  e.end = read_u64(offsets[1], path, name, "data_offsets");
  if (e.end < e.begin)
    fail("safetensors", "'", path, "': tensor '", name, "' data_offsets [", e.begin, ", ", e.end,
         "] end before they begin");
  if (e.end - e.begin != numel * dtype_size(e.dtype))
    fail("safetensors", "'", path, "': tensor '", name, "' shape ", e.shape, " of ",
         dtype.get<std::string>(), " needs ", numel * dtype_size(e.dtype), " bytes but its byte ",
         "range [", e.begin, ", ", e.end, ") holds ", e.end - e.begin);
  return e;
}

Metadata parse_metadata(const Json& value, const std::string& path) {
  if (!value.is_object()) fail("safetensors", "'", path, "': __metadata__ must be an object");
  Metadata metadata;
  for (const auto& [key, text] : value.items()) {
    if (!text.is_string())
      fail("safetensors", "'", path, "': __metadata__ value '", key, "' is not a string");
    metadata[key] = text.get<std::string>();
  }
  return metadata;
}

// Byte ranges inside the data buffer, none overlapping another.
void check_ranges(std::vector<Entry>& entries, std::uint64_t data_bytes, const std::string& path) {
  for (const Entry& e : entries)
    if (e.end > data_bytes)
      fail("safetensors", "'", path, "': tensor '", e.name, "' byte range [", e.begin, ", ", e.end,
           ") runs past the end of the data (", data_bytes, " bytes); is the file truncated?");
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      fail("safetensors", "'", path, "': tensors '", entries[i - 1].name, "' and '",
           entries[i].name, "' overlap: [", entries[i - 1].begin, ", ", entries[i - 1].end,
           ") and [", entries[i].begin, ", ", entries[i].end, ")");
}

std::vector<char> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("safetensors", "cannot open '", path, "': ", std::strerror(errno));
  const std::streamoff size = in.tellg();
  std::vector<char> bytes(std::size_t(std::max<std::streamoff>(size, 0)));
  in.seekg(0);
  if (!bytes.empty() && !in.read(bytes.data(), std::streamsize(bytes.size())))
    fail("safetensors", "reading '", path, "' failed");
  return bytes;
}

}  // namespace

SafetensorsContents load_safetensors(const std::string& path) {
  const std::vector<char> bytes = read_whole_file(path);
  if (bytes.size() < 8)
    fail("safetensors", "'", path, "' is truncated: ", bytes.size(),
         " bytes, less than the 8-byte header length");
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= std::uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (length > bytes.size() - 8 || length > kMaxHeaderBytes)
    fail("safetensors", "'", path, "': header length ", length, " runs past the end of the file (",
         bytes.size(), " bytes)");
  Json header;
  try {
    header = parse_json(std::string_view(bytes.data() + 8, std::size_t(length)), "header");
  } catch (const Error& e) {
    fail("safetensors", "'", path, "': the header is not valid JSON: ", e.what());
  }
  if (!header.is_object()) fail("safetensors", "'", path, "': the header is not a JSON object");
  SafetensorsContents contents;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__")
      contents.metadata = parse_metadata(info, path);
    else
      entries.push_back(parse_entry(name, info, path));
  }
  const std::uint64_t data_bytes = bytes.size() - 8 - length;
  check_ranges(entries, data_bytes, path);
  const char* data = bytes.data() + 8 + length;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.dtype == DType::kBool) {
      // A bool is 0 or 1; any other byte would be undefined behaviour once read as bool.
      for (std::uint64_t i = e.begin; i < e.end; ++i)
        if (static_cast<unsigned char>(data[i]) > 1)
          fail("safetensors", "'", path, "': tensor '", e.name, "' (BOOL) holds the byte ",
               int(static_cast<unsigned char>(data[i])), " at element ", i - e.begin,
               "; a BOOL element must be 0 or 1");
    }
    if (e.end > e.begin) std::memcpy(t.raw_data(), data + e.begin, e.end - e.begin);
    contents.tensors.emplace(e.name, std::move(t));
  }
  return contents;
}

}  // namespace weft::io
