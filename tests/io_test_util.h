// Helpers for the io tests: where the shared data sets live (skipping a test with a message
// when one is absent), and a per-test temporary directory for malformed-input files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace weft::testing {

// The shared data directory: $WEFT_DATA_DIR, else the one beside the source tree.
inline std::filesystem::path io_data_dir() {
  if (const char* dir = std::getenv("WEFT_DATA_DIR"); dir && *dir) return dir;
  return WEFT_TEST_DATA_DIR;
}

// Skips the calling test when `relative` (under the data directory) is missing.
#define WEFT_REQUIRE_DATA(relative)                                                  \
  do {                                                                               \
    if (!std::filesystem::exists(::weft::testing::io_data_dir() / (relative)))       \
      GTEST_SKIP() << "data file " << (::weft::testing::io_data_dir() / (relative))  \
                   << " is absent (set WEFT_DATA_DIR to the shared data directory)"; \
  } while (0)

inline std::string io_data_path(const std::string& relative) {
  return (io_data_dir() / relative).string();
}

// A fixture owning a fresh temporary directory, removed after the test.
class IoTempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("weft_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to a file named `name` in the directory and returns its path.
  std::string write_file(const std::string& name, const std::string& text) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::filesystem::path dir_;
};

}  // namespace weft::testing
