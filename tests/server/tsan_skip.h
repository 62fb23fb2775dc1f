// REPRISE_SKIP_UNDER_TSAN(): skips a test that runs a gRPC server under ThreadSanitizer.
// Debian's gRPC (and the Abseil under it) is not built with ThreadSanitizer, so every hand-off
// inside it reports as a data race. The lifecycle and concurrency tests that need no gRPC
// (model_repository_test, stream_pool_test, the batcher tests) carry the TSan coverage.
#ifndef REPRISE_TESTS_SERVER_TSAN_SKIP_H_
#define REPRISE_TESTS_SERVER_TSAN_SKIP_H_

#include "gtest/gtest.h"

#if defined(__SANITIZE_THREAD__)
#define REPRISE_SKIP_UNDER_TSAN() GTEST_SKIP() << "gRPC from Debian is not TSan-instrumented"
#else
#define REPRISE_SKIP_UNDER_TSAN() static_cast<void>(0)
#endif

#endif  // REPRISE_TESTS_SERVER_TSAN_SKIP_H_
