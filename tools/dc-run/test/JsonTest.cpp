//===- JsonTest.cpp - the small JSON reader -------------------------------===//
#include "Json.h"

#include <gtest/gtest.h>

using namespace dcrun;

TEST(Json, ParsesNestedDocuments) {
  std::string error;
  auto value = json::parse(
      R"({"abi": 1, "plan": {"bytes": 9007199254740993}, "x": [1.5, -2e3,)"
      R"( true, null, "a\"b\u00e9\n"]})",
      error);
  ASSERT_TRUE(value) << error;
  ASSERT_TRUE(value->isObject());
  EXPECT_EQ(value->get("abi")->integer, 1);
  // Integers keep all 64 bits (a double would round this one).
  EXPECT_EQ(value->get("plan")->get("bytes")->integer, 9007199254740993LL);
  const json::Value &x = *value->get("x");
  ASSERT_EQ(x.array.size(), 5u);
  EXPECT_EQ(x.array[0].number, 1.5);
  EXPECT_FALSE(x.array[0].integer.has_value());
  EXPECT_EQ(x.array[1].number, -2000.0);
  EXPECT_TRUE(x.array[2].boolean);
  EXPECT_EQ(x.array[3].kind, json::Value::Kind::Null);
  EXPECT_EQ(x.array[4].string, "a\"b\xc3\xa9\n");
  EXPECT_EQ(value->get("missing"), nullptr);
}

TEST(Json, ReportsWhereItFailed) {
  std::string error;
  EXPECT_FALSE(json::parse(R"({"a": 1,})", error));
  EXPECT_EQ(error, "offset 8: expected a member name in quotes");
  EXPECT_FALSE(json::parse(R"([1 2])", error));
  EXPECT_EQ(error, "offset 3: expected ',' or ']' in an array");
  EXPECT_FALSE(json::parse(R"("open)", error));
  EXPECT_EQ(error, "offset 5: unterminated string");
  EXPECT_FALSE(json::parse("{} x", error));
  EXPECT_EQ(error, "offset 3: unexpected text after the JSON value");
  EXPECT_FALSE(json::parse(std::string(1000, '['), error));
  EXPECT_NE(error.find("nested too deeply"), std::string::npos);
}

TEST(Json, QuotesStrings) {
  EXPECT_EQ(json::quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  std::string error;
  auto back = json::parse(json::quote("tab\there"), error);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->string, "tab\there");
}
