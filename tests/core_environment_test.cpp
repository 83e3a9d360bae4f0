// Integers from environment variables (core/environment.h): unset or empty is no value; a whole
// integer from the minimum to the maximum is taken; anything else fails naming where, the variable,
// what it must be and the text it held.
#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weft/core/environment.h"
#include "weft/core/error.h"

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr const char* kVariable = "WEFT_TEST_ENVIRONMENT_INTEGER";

std::optional<std::int64_t> read_with(const char* text) {
  if (text == nullptr)
    unsetenv(kVariable);
  else
    setenv(kVariable, text, 1);
  return integer_from_environment(kVariable, 0, "test", "a number of rows");
}

TEST(IntegerFromEnvironment, UnsetOrEmptyIsNoValueAndAWholeIntegerIsTaken) {
  EXPECT_EQ(read_with(nullptr), std::nullopt);
  EXPECT_EQ(read_with(""), std::nullopt);
  EXPECT_EQ(read_with("0"), 0);
  EXPECT_EQ(read_with("4096"), 4096);
  unsetenv(kVariable);
}

TEST(IntegerFromEnvironment, AnythingElseFailsNamingTheVariableAndTheText) {
  for (const std::string text : {"12x", "-1", " 3", "1e3", "99999999999999999999", "rows"}) {
    EXPECT_THAT([&] { read_with(text.c_str()); },
                ThrowsMessage<Error>(HasSubstr("[test] WEFT_TEST_ENVIRONMENT_INTEGER must be a "
                                               "number of rows, got '" +
                                               text + "'")))
        << text;
  }
  setenv(kVariable, std::string(100, '7').append("x").c_str(), 1);  // quoted to 40 characters
  EXPECT_THAT([] { integer_from_environment(kVariable, 0, "test", "a number"); },
              ThrowsMessage<Error>(HasSubstr("got '" + std::string(40, '7') + "'")));
  unsetenv(kVariable);
}

TEST(IntegerFromEnvironment, AValueAboveTheMaximumFails) {
  setenv(kVariable, "64", 1);
  EXPECT_EQ(integer_from_environment(kVariable, 1, "test", "1 to 64", 64), 64);
  setenv(kVariable, "65", 1);
  EXPECT_THAT(
      [] { integer_from_environment(kVariable, 1, "test", "1 to 64", 64); },
      ThrowsMessage<Error>(HasSubstr("WEFT_TEST_ENVIRONMENT_INTEGER must be 1 to 64, got '65'")));
  unsetenv(kVariable);
}

}  // namespace
}  // namespace weft
