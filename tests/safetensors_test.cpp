// The safetensors reader and writer: a round trip, the byte layout, a failed save leaving the
// previous file intact, each corruption rejected with a message naming the file and tensor,
// and a file read back by NumPy with nothing but the standard library (skipped without NumPy).
#include "weft/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "op_test_util.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("weft_safetensors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }

  // A file with the given header text and `data_bytes` zero bytes of data.
  std::string raw_file(const std::string& header, std::size_t data_bytes,
                       std::uint64_t length_field = UINT64_MAX) {
    const std::string p = path("raw.safetensors");
    std::ofstream out(p, std::ios::binary);
    const std::uint64_t length = length_field == UINT64_MAX ? header.size() : length_field;
    for (int i = 0; i < 8; ++i) out.put(char(length >> (8 * i)));
    out << header << std::string(data_bytes, '\0');
    return p;
  }

  fs::path dir_;
};

io::TensorMap sample() {
  return {{"weights", Tensor::from_vector(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, -6.5f})},
          {"ids", Tensor::from_vector(Shape{4}, std::vector<std::int32_t>{7, -1, 0, 42})},
          {"scalar", Tensor::scalar(3.25f)},
          {"empty", Tensor::zeros(Shape{0, 5})},
          {"wide", Tensor::from_vector(Shape{2}, std::vector<double>{0.1, -1e300})},
          {"big", Tensor::from_vector(Shape{2}, std::vector<std::int64_t>{(1LL << 62) + 1, -3})},
          {"flags", Tensor::from_bools(Shape{3}, {true, false, true})}};
}

TEST_F(Safetensors, RoundTripKeepsDtypesShapesValuesAndMetadata) {
  io::save_safetensors(path("a.safetensors"), sample(), {{"format", "pt"}, {"step", "12"}});
  const io::SafetensorsContents back = io::load_safetensors(path("a.safetensors"));
  ASSERT_EQ(back.tensors.size(), 7u);
  for (const auto& [name, tensor] : sample()) {
    const Tensor& t = back.tensors.at(name);
    EXPECT_EQ(t.shape(), tensor.shape()) << name;
    EXPECT_EQ(t.dtype(), tensor.dtype()) << name;
    ASSERT_EQ(t.nbytes(), tensor.nbytes()) << name;
    EXPECT_EQ(std::memcmp(t.raw_data(), tensor.raw_data(), t.nbytes()), 0) << name;
  }
  EXPECT_EQ(back.metadata.at("step"), "12");
  // Layout: 8-byte length, a space-padded header of a multiple of 8 bytes, then the data.
  std::ifstream in(path("a.safetensors"), std::ios::binary);
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t(prefix[i]) << (8 * i);
  EXPECT_EQ(length % 8, 0u);
  EXPECT_EQ(fs::file_size(path("a.safetensors")), 8 + length + 24 + 16 + 4 + 16 + 16 + 3);
}

TEST_F(Safetensors, FailedSaveKeepsThePreviousFile) {
  io::save_safetensors(path("keep.safetensors"), sample());
  io::TensorMap bad = sample();
  bad["__metadata__"] = Tensor::scalar(1.0f);
  expect_error([&] { io::save_safetensors(path("keep.safetensors"), bad); },
               {"[safetensors] cannot save '",
                "keep.safetensors': invalid tensor name "
                "'__metadata__'"});
  EXPECT_EQ(io::load_safetensors(path("keep.safetensors")).tensors.size(), 7u);
  expect_error([&] { io::save_safetensors(path("no/such/dir/x.safetensors"), sample()); },
               {"cannot save '", "no/such/dir/x.safetensors': creating a temporary file"});
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
}

TEST_F(Safetensors, CorruptFilesAreRejectedByName) {
  const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_error([&] { io::load_safetensors(path("missing.safetensors")); },
               {"[safetensors] cannot open '", "missing.safetensors'"});
  {
    std::ofstream(path("short.safetensors"), std::ios::binary) << "abc";
    expect_error([&] { io::load_safetensors(path("short.safetensors")); },
                 {"short.safetensors' is truncated: 3 bytes"});
  }
  expect_error([&] { io::load_safetensors(raw_file(ok, 8, 4000)); },
               {"raw.safetensors': header length 4000 runs past the end of the file"});
  expect_error([&] { io::load_safetensors(raw_file("{\"t\": [1,", 8)); },
               {"raw.safetensors': the header is not valid JSON"});
  expect_error([&] { io::load_safetensors(raw_file("[1, 2]", 0)); },
               {"the header is not a JSON object"});
  expect_error([&] { io::load_safetensors(raw_file(ok, 4)); },
               {"tensor 't' byte range [0, 8) runs past the end of the data (4 bytes)"});
  expect_error(
      [&] {
        io::load_safetensors(raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                      R"("u":{"dtype":"I32","shape":[2],"data_offsets":[4,12]}})",
                                      12));
      },
      {"tensors 't' and 'u' overlap: [0, 8) and [4, 12)"});
  expect_error(
      [&] {
        io::load_safetensors(
            raw_file(R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4));
      },
      {"tensor 't' has dtype \"F16\"; only F32, F64, I32, I64 and BOOL are supported"});
  // A BOOL element is a byte holding 0 or 1; anything else is refused, naming the element.
  {
    const std::string p = path("bool.safetensors");
    const std::string header = R"({"b":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})";
    std::ofstream out(p, std::ios::binary);
    for (int i = 0; i < 8; ++i) out.put(char(header.size() >> (8 * i)));
    out << header << std::string("\x01\x00\x02", 3);
    out.close();
    expect_error(
        [&] { io::load_safetensors(p); },
        {"tensor 'b' (BOOL) holds the byte 2 at element 2; a BOOL element must be 0 or 1"});
  }
  expect_error(
      [&] {
        io::load_safetensors(
            raw_file(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
      },
      {"tensor 't' shape [3] of F32 needs 12 bytes but its byte range [0, 8) holds 8"});
  expect_error(
      [&] {
        io::load_safetensors(
            raw_file(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8));
      },
      {"tensor 't' data_offsets [8, 0] end before they begin"});
  expect_error(
      [&] {
        io::load_safetensors(
            raw_file(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8));
      },
      {"tensor 't': shape must hold non-negative integers, got -2"});
  expect_error([&] { io::load_safetensors(raw_file(R"({"t":{"dtype":"F32"}})", 8)); },
               {"tensor 't' needs an object with dtype, shape and data_offsets"});
  expect_error([&] { io::load_safetensors(raw_file(R"({"__metadata__":{"a":1}})", 0)); },
               {"__metadata__ value 'a' is not a string"});
}

// The first interpreter among python3 and /usr/bin/python3 that can import NumPy.
std::string python_with_numpy() {
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(python) + " -c 'import numpy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  return "";
}

TEST_F(Safetensors, NumPyReadsTheFileWithTheStandardLibrary) {
  const std::string python = python_with_numpy();
  if (python.empty()) GTEST_SKIP() << "no python3 with numpy (scripts/install_deps.sh installs it)";
  io::save_safetensors(path("np.safetensors"), sample());
  const std::string script =
      "import json, struct, sys, numpy as np\n"
      "raw = open(sys.argv[1], 'rb').read()\n"
      "n = struct.unpack('<Q', raw[:8])[0]\n"
      "h = json.loads(raw[8:8 + n])\n"
      "def get(k):\n"
      "    e = h[k]; b, t = e['data_offsets']\n"
      "    dt = {'F32': '<f4', 'I32': '<i4', 'F64': '<f8', 'I64': '<i8', 'BOOL': '?'}[e['dtype']]\n"
      "    return np.frombuffer(raw[8 + n + b:8 + n + t], dtype=dt).reshape(e['shape'])\n"
      "assert get('weights').tolist() == [[1, 2, 3], [4, 5, -6.5]], get('weights')\n"
      "assert get('ids').tolist() == [7, -1, 0, 42]\n"
      "assert get('scalar').shape == () and float(get('scalar')) == 3.25\n"
      "assert get('empty').shape == (0, 5)\n"
      "assert get('wide').tolist() == [0.1, -1e300]\n"
      "assert get('big').tolist() == [2**62 + 1, -3]\n"
      "assert get('flags').tolist() == [True, False, True]\n";
  std::ofstream(path("check.py")) << script;
  const std::string command = python + " " + path("check.py") + " " + path("np.safetensors");
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
}  // namespace weft::testing
