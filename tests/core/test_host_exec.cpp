// The host executor's capture (core/host_exec.hpp): what is issued between capture_begin and
// capture_end is recorded, not run, with its arguments by value, as a CUDA Graph's nodes are;
// launch runs it again on whatever the memory it names holds then; what a graph cannot hold (a
// read, an upload, a sync, a buffer growth) is refused inside a capture.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/host_exec.hpp"

namespace dsp {
namespace {

struct AddOne {
  const int64_t* in;
  int64_t* out;
  void operator()(int64_t i) const { out[i] = in[i] + 1; }
};

TEST(HostExecCapture, ReplaysTheRecordedSequenceOnTheMemoryAsItIsThen) {
  HostExec ex;
  HostExec::Buffer in = ex.buffer(), mid = ex.buffer(), out = ex.buffer();
  auto* a = static_cast<int64_t*>(in.reserve(4 * sizeof(int64_t)));
  auto* b = static_cast<int64_t*>(mid.reserve(4 * sizeof(int64_t)));
  auto* c = static_cast<int64_t*>(out.reserve(5 * sizeof(int64_t)));
  for (int i = 0; i < 4; ++i) a[i] = 10 * i;
  ex.capture_begin();
  ex.for_each(4, AddOne{a, b});
  ex.zero(c, sizeof(int64_t));
  ex.inclusive_scan(b, c + 1, 4);
  const HostExec::Graph g = ex.capture_end();
  EXPECT_EQ(g.size(), 3u);
  EXPECT_EQ(c[4], 0);  // nothing ran yet
  ex.launch(g);
  EXPECT_EQ(std::vector<int64_t>(c, c + 5), (std::vector<int64_t>{0, 1, 12, 33, 64}));
  for (int i = 0; i < 4; ++i) a[i] = i;  // new inputs in the same memory
  ex.launch(g);
  EXPECT_EQ(std::vector<int64_t>(c, c + 5), (std::vector<int64_t>{0, 1, 3, 6, 10}));
  EXPECT_EQ(ex.traffic().graph_launches, 2);
  EXPECT_EQ(ex.traffic().syncs, 0);
}

TEST(HostExecCapture, WhatAGraphCannotHoldIsRefused) {
  HostExec ex;
  HostExec::Buffer buf = ex.buffer();
  int64_t* d = static_cast<int64_t*>(buf.reserve(8));
  int64_t h = 0;
  auto refused = [&](auto&& op, const std::string& message) {
    ex.capture_begin();
    try {
      op();
      ADD_FAILURE() << "not refused: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
    ex.capture_end();
  };
  refused([&] { ex.to_host(&h, d, 8); }, "executor: a read inside a capture");
  refused([&] { ex.to_device(d, &h, 8); }, "executor: an upload inside a capture");
  refused([&] { ex.sync(); }, "executor: a sync inside a capture");
  refused([&] { ex.capture_begin(); }, "executor: a capture inside a capture");
  ex.capture_begin();
  buf.reserve(1024);
  try {
    ex.capture_end();
    ADD_FAILURE() << "a growth inside a capture was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("executor: a buffer grew inside a capture"),
              std::string::npos)
        << e.what();
  }
  ex.sync();  // out of the capture: issued as usual
  EXPECT_EQ(ex.traffic().syncs, 1);
}

}  // namespace
}  // namespace dsp
