//===- TraceTest.cpp - the Chrome trace events of one rank ----------------===//
#include "Trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using namespace dcrt;
using namespace dcrt::detail;

namespace {
/// The rank's events as the JSON array writeTrace embeds them in.
nlohmann::json parseEvents(const Tracer &tracer, int rank) {
  return nlohmann::json::parse("[" + tracer.eventsJson(rank) + "]");
}
} // namespace

TEST(Trace, LongSpanNamesStayValidJson) {
  // Op keys come from the compiler and can be long; a fixed line buffer
  // once cut them off mid-string.
  std::string name(1000, 'k');
  name += "\"quoted\"\\";
  Tracer tracer;
  tracer.setEnabled(true);
  tracer.span(Track::Compute, name.c_str(), 1000, 3000, "step", 7);
  nlohmann::json events = parseEvents(tracer, 2);
  const nlohmann::json *span = nullptr;
  for (const nlohmann::json &event : events)
    if (event["ph"] == "X")
      span = &event;
  ASSERT_NE(span, nullptr);
  EXPECT_EQ((*span)["name"], name);
  EXPECT_EQ((*span)["cat"], "compute");
  EXPECT_EQ((*span)["pid"], 2);
  EXPECT_DOUBLE_EQ((*span)["ts"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ((*span)["dur"].get<double>(), 2.0);
  EXPECT_EQ((*span)["args"]["step"], 7);
}

TEST(Trace, OverlappingTransfersGetLanes) {
  Tracer tracer;
  tracer.setEnabled(true);
  tracer.transfer(Track::Gather, "all-gather", 0, 100, 8);
  tracer.transfer(Track::Gather, "all-gather", 50, 150, 8);
  int threadNames = 0;
  for (const nlohmann::json &event : parseEvents(tracer, 0))
    if (event["name"] == "thread_name") {
      EXPECT_EQ(event["args"]["name"],
                ++threadNames == 1 ? "all-gather" : "all-gather #2");
    }
  EXPECT_EQ(threadNames, 2);
}
