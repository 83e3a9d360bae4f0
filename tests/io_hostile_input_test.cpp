// Hostile input to the io readers (issue 13): nesting deep enough to overflow a recursive
// parser, sizes that would allocate without bound, prefixes accepted as the whole, messages
// quoting megabytes, temporaries left by killed saves. Each case must end in one weft::Error
// (or a result within a documented limit), never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <sstream>

#include "io_test_util.h"
#include "weft/core/error.h"
#include "weft/io/csv.h"
#include "weft/io/input_limits.h"
#include "weft/io/json_lines.h"
#include "weft/io/molecule_graph.h"
#include "weft/io/safetensors.h"
#include "weft/io/sst.h"
#include "weft/io/tatoeba.h"
#include "weft/io/utf8.h"
#include "weft/io/word_vectors.h"

namespace weft {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

std::string nested_arrays(std::int64_t depth) {
  return std::string(std::size_t(depth), '[') + std::string(std::size_t(depth), ']');
}

TEST(HostileJson, NestingPastTheLimitIsRefusedBeforeParsing) {
  const std::int64_t limit = io::input_limits().max_json_depth;
  EXPECT_NO_THROW(io::parse_json(nested_arrays(limit), "x"));
  EXPECT_THAT([&] { io::parse_json(nested_arrays(limit + 1), "line 7"); },
              ThrowsMessage<Error>(HasSubstr("[json] line 7:" + std::to_string(limit + 1) +
                                             ": JSON nested deeper than")));
  // 70,000 levels of objects, the depth that overflowed the stack before.
  std::string deep;
  for (int i = 0; i < 70000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(70000, '}');
  EXPECT_THAT([&] { io::parse_json(deep, "x"); },
              ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_JSON_DEPTH")));
  // Brackets inside strings are text, not nesting.
  EXPECT_NO_THROW(io::parse_json("[\"" + std::string(100000, '[') + "\"]", "x"));
}

// At the limit, parsing, copying, dumping and destroying the value fit a 128 KiB stack (a
// server thread's stack may be small). AddressSanitizer's frames are several times larger
// (redzones; the sanitizer builds are unoptimized), so there the stack is 1 MiB.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kSmallStack = 1024 * 1024;
#else
constexpr std::size_t kSmallStack = 128 * 1024;
#endif

// glibc carves the static TLS of every loaded library out of a new thread's stack, so that
// is added to the small stack: a CUDA build loads cuBLAS, whose TLS alone is larger than
// 128 KiB (pthread_create refused the bare size with EINVAL on an H200 machine).
std::size_t static_tls_bytes() {
  std::size_t total = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* sum) {
        for (int k = 0; k < info->dlpi_phnum; ++k)
          if (info->dlpi_phdr[k].p_type == PT_TLS)
            *static_cast<std::size_t*>(sum) +=
                info->dlpi_phdr[k].p_memsz + info->dlpi_phdr[k].p_align;
        return 0;
      },
      &total);
  return total;
}

TEST(HostileJson, AValueAtTheLimitFitsASmallStack) {
  struct Run {
    static void* body(void* out) {
      try {
        const nlohmann::json value =
            io::parse_json(nested_arrays(io::input_limits().max_json_depth), "x");
        const nlohmann::json copy = value;
        *static_cast<std::size_t*>(out) = copy.dump().size();
      } catch (...) {
      }
      return nullptr;
    }
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  const std::size_t page = 4096;
  const std::size_t stack = (kSmallStack + static_tls_bytes() + page - 1) / page * page;
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack), 0) << stack << " bytes";
  std::size_t size = 0;
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, &attr, &Run::body, &size), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(size, std::size_t(2 * io::input_limits().max_json_depth));
}

TEST(HostileJson, NumbersOutOfRangeAreWeftErrors) {
  EXPECT_THAT([] { io::parse_json("[1e400]", "in.jsonl:3"); },
              ThrowsMessage<Error>(HasSubstr("[json] in.jsonl:3:")));
  std::istringstream in("{\"a\": 1}\n{\"a\": -1e400}\n");
  EXPECT_THAT([&] { io::read_json_lines(in, "in.jsonl"); },
              ThrowsMessage<Error>(HasSubstr("[json_lines] in.jsonl:2:")));
}

TEST(HostileJson, ErrorMessagesStayShortWhateverTheInput) {
  const std::string line = "[\"" + std::string(10 << 20, 'x');  // 10 MB, unterminated
  try {
    io::parse_json(line, "big");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_LT(std::strlen(e.what()), std::size_t(2300));
    EXPECT_THAT(e.what(), HasSubstr("[json] big:"));
  }
  // Any weft::Error is bounded, whatever a caller puts in it.
  const Error error(std::string(1 << 20, 'y'));
  EXPECT_THAT(error.what(), HasSubstr("more bytes)"));
  EXPECT_LT(std::strlen(error.what()), std::size_t(2300));
}

TEST(HostileJson, JsonLinesTakeCrLfAndRefuseLinesPastTheLimit) {
  std::istringstream crlf("{\"a\": 1}\r\n{\"a\": 2}\r\n");
  const std::vector<nlohmann::json> values = io::read_json_lines(crlf, "crlf.jsonl");
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[1]["a"], 2);
  std::string line;
  bool too_long = false;
  std::istringstream long_line(std::string(5000, 'x') + "\nnext\n");
  ASSERT_TRUE(io::read_bounded_line(long_line, line, 100, too_long));
  EXPECT_TRUE(too_long);
  EXPECT_EQ(line.size(), 100u);
  ASSERT_TRUE(io::read_bounded_line(long_line, line, 100, too_long));
  EXPECT_FALSE(too_long);
  EXPECT_EQ(line, "next");
  EXPECT_FALSE(io::read_bounded_line(long_line, line, 100, too_long));
}

TEST(HostileUtf8, FindsTheFirstBadByte) {
  EXPECT_EQ(io::find_invalid_utf8("plain"), std::nullopt);
  EXPECT_EQ(io::find_invalid_utf8("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"), std::nullopt);
  EXPECT_EQ(io::find_invalid_utf8("ab\xff"), 2u);             // never a UTF-8 byte
  EXPECT_EQ(io::find_invalid_utf8("a\xc3"), 1u);              // truncated
  EXPECT_EQ(io::find_invalid_utf8("a\xc0\xaf"), 1u);          // overlong '/'
  EXPECT_EQ(io::find_invalid_utf8("\xed\xa0\x80"), 0u);       // a surrogate
  EXPECT_EQ(io::find_invalid_utf8("x\xf4\x90\x80\x80"), 1u);  // past U+10FFFF
  EXPECT_EQ(io::find_invalid_utf8("\xe2\x82"), 0u);           // cut short
  EXPECT_EQ(io::find_invalid_utf8(std::string_view("a\0b", 3)), std::nullopt);  // NUL is ASCII
}

using HostileFiles = testing::IoTempDir;

std::string u64_bytes(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[std::size_t(i)] = char((v >> (8 * i)) & 0xFF);
  return out;
}

std::string safetensors_bytes(const std::string& header, std::size_t data_bytes) {
  return u64_bytes(header.size()) + header + std::string(data_bytes, '\0');
}

TEST_F(HostileFiles, SafetensorsHeadersCannotNestOrOverflow) {
  std::string deep = R"({"t": {"dtype": "F32", "shape": )";
  for (int i = 0; i < 70000; ++i) deep += '[';
  EXPECT_THAT(
      [&] { io::load_safetensors(write_file("deep.safetensors", safetensors_bytes(deep, 0))); },
      ThrowsMessage<Error>(HasSubstr("JSON nested deeper than")));
  // 2^32 * 2^32 elements: the count overflows before it meets the data length.
  const std::string overflow =
      R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})";
  EXPECT_THAT(
      [&] { io::load_safetensors(write_file("big.safetensors", safetensors_bytes(overflow, 0))); },
      ThrowsMessage<Error>(HasSubstr("is too large")));
  const std::string many =
      R"({"t": {"dtype": "F32", "shape": [1048576, 1048576], "data_offsets": [0, 4]}})";
  EXPECT_THAT(
      [&] { io::load_safetensors(write_file("many.safetensors", safetensors_bytes(many, 4))); },
      ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_TENSOR_ELEMENTS")));
}

TEST_F(HostileFiles, WordVectorFilesCannotAskForHugeVectors) {
  // An 11-byte header announcing 34M-dimensional vectors.
  EXPECT_THAT(
      [&] {
        io::load_word_vectors(write_file("h.txt", "1 34000000\n"),
                              {.header = io::VectorHeader::kWord2Vec});
      },
      ThrowsMessage<Error>(HasSubstr("34000000-dimensional vectors")));
  std::string row = "w";
  for (std::int64_t i = 0; i <= io::input_limits().max_vector_dim; ++i) row += " 0";
  EXPECT_THAT([&] { io::load_word_vectors(write_file("r.txt", row + "\n")); },
              ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_VECTOR_DIM")));
}

// Sets smaller limits for one test and restores the process's afterwards.
class ScopedLimits {
 public:
  explicit ScopedLimits(const io::InputLimits& limits) : saved_(io::input_limits()) {
    io::set_input_limits(limits);
  }
  ~ScopedLimits() { io::set_input_limits(saved_); }

 private:
  io::InputLimits saved_;
};

TEST_F(HostileFiles, LinesPastTheLimitAreRefusedWithoutBufferingThem) {
  io::InputLimits small = io::input_limits();
  small.max_line_bytes = 1000;
  const ScopedLimits scoped(small);
  const std::string path = write_file("long.txt", "a 1 2\n" + std::string(5000, 'x') + "\n");
  EXPECT_THAT([&] { io::load_word_vectors(path); },
              ThrowsMessage<Error>(HasSubstr("long.txt:2: line longer than 1000 bytes")));
  std::istringstream in("[1]\n" + std::string(5000, ' ') + "\n");
  EXPECT_THAT([&] { io::read_json_lines(in, "in.jsonl"); },
              ThrowsMessage<Error>(HasSubstr("in.jsonl:2: line longer than 1000 bytes")));
}

TEST_F(HostileFiles, TextThatIsNotUtf8IsRefusedWithItsPosition) {
  EXPECT_THAT([&] { io::read_sst_file(write_file("t.txt", "(2 ok)\n(3 (2 b\xe9) (3 c))\n")); },
              ThrowsMessage<Error>(HasSubstr("[sst] " + (dir_ / "t.txt").string() +
                                             ":2:8: invalid UTF-8 (byte 0xe9)")));
  EXPECT_THAT([&] { io::parse_csv("a,b\n1,x\xff\n", "m.csv"); },
              ThrowsMessage<Error>(HasSubstr("[csv] m.csv:2:4: invalid UTF-8 (byte 0xff)")));
  EXPECT_THAT([&] { io::read_tatoeba_file(write_file("eng.csv", "1\teng\tH\xc3llo\n")); },
              ThrowsMessage<Error>(HasSubstr(":1:8: invalid UTF-8")));
}

TEST(HostileSmiles, APrefixIsNeverTakenForTheMolecule) {
  if (!io::smiles_parser_available()) GTEST_SKIP() << "built without RDKit";
  EXPECT_THAT([] { io::parse_smiles(std::string_view("CCO\0CC", 6)); },
              ThrowsMessage<Error>(HasSubstr("column 4")));
  EXPECT_THAT([] { io::parse_smiles("CCO ethanol"); },
              ThrowsMessage<Error>(HasSubstr("byte 0x20")));
  EXPECT_THAT([] { io::parse_smiles("CC\xc3\xa9"); }, ThrowsMessage<Error>(HasSubstr("byte 0xc3")));
  EXPECT_EQ(io::parse_smiles("CCO").atoms.size(), 3u);
}

TEST(HostileSmiles, MoleculesPastTheAtomLimitAreRefusedBeforeRdkitRuns) {
  if (!io::smiles_parser_available()) GTEST_SKIP() << "built without RDKit";
  const std::int64_t limit = io::input_limits().max_molecule_atoms;
  EXPECT_THAT([] { io::parse_smiles(std::string(5000, 'C')); },
              ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_MOLECULE_ATOMS")));
  // Between the quick bound and the exact count: RDKit parses it, the count refuses it.
  EXPECT_THAT([&] { io::parse_smiles(std::string(std::size_t(limit + 1), 'C')); },
              ThrowsMessage<Error>(HasSubstr("atoms, more than")));
  EXPECT_EQ(io::parse_smiles(std::string(std::size_t(limit), 'C')).atoms.size(),
            std::size_t(limit));
}

TEST(HostileSmiles, WildcardsInRingsAreBoundedBeforeKekulization) {
  if (!io::smiles_parser_available()) GTEST_SKIP() << "built without RDKit";
  const std::int64_t limit = io::input_limits().max_ring_wildcards;
  // A ring of one carbon and `n` wildcards beside a benzene ring.
  const auto ring_of = [](std::int64_t n) {
    return "c1ccccc1C2" + std::string(std::size_t(n), '*') + "2";
  };
  EXPECT_EQ(io::parse_smiles(ring_of(limit)).atoms.size(), std::size_t(7 + limit));
  EXPECT_THAT([&] { io::parse_smiles(ring_of(limit + 1)); },
              ThrowsMessage<Error>(
                  AllOf(HasSubstr(std::to_string(limit + 1) + " wildcard atoms (*) in rings"),
                        HasSubstr("WEFT_LIMIT_RING_WILDCARDS"))));
  // Wildcards outside rings (a polymer's repeat unit, an attachment point) are not bounded.
  const std::string chain = "*CC(*)c1ccccc1" + std::string(40, '*');
  EXPECT_EQ(io::parse_smiles(chain).atoms.size(), 10u + 40u);
  // The fuzzer's find (fuzz/corpus/smiles/regression-ring-wildcards): 29 wildcards in rings
  // around two unkekulizable aromatic systems, about 2^19 kekulizations in RDKit.
  EXPECT_THAT(
      [] {
        io::parse_smiles(
            "C1O~CC3OO~CC3OC(~********************************CC2OC(OC(C#N)c1ccc#cc1)C(O~"
            "CC3OC(~********O)C(O)C2*********C**********C2OC(OC(C#N)c1ccc#cc1)1C(O)C(O)C2O)C("
            "O)CO)C(O)C*(O)C3*");
      },
      ThrowsMessage<Error>(HasSubstr("WEFT_LIMIT_RING_WILDCARDS")));
}

TEST_F(HostileFiles, ASaveRemovesTemporariesOfDeadSavesOnly) {
  // A process that exited: its pid is free (waited for), as a killed save's would be.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string target = (dir_ / "model.safetensors").string();
  const std::string dead =
      write_file("model.safetensors.tmp-" + std::to_string(child) + "-abcdef", "partial");
  const std::string alive =
      write_file("model.safetensors.tmp-" + std::to_string(getpid()) + "-ghijkl", "in progress");
  const std::string other =
      write_file("other.safetensors.tmp-" + std::to_string(child) + "-abcdef", "x");
  io::save_safetensors(target, {{"t", Tensor::full({2}, 1.0f)}});
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_EQ(io::load_safetensors(target).tensors.at("t").to_float_vector(),
            (std::vector<float>{1, 1}));
}

}  // namespace
}  // namespace weft
