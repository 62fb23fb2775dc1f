// The fuzz entry points (tests/fuzz/*.cc): each feeds one input through one hostile-input path
// and must return without a sanitizer report, whatever the bytes. libFuzzer drives them in the
// fuzz preset (REPRISE_FUZZ, one binary per target); fuzz_replay_test replays the committed
// corpus and regressions through the same functions in the normal builds.
#ifndef REPRISE_TESTS_FUZZ_FUZZ_ENTRY_H_
#define REPRISE_TESTS_FUZZ_FUZZ_ENTRY_H_

#include <cstddef>
#include <cstdint>

namespace reprise::fuzz {

int FuzzInferRequest(const uint8_t* data, size_t size);
int FuzzOnnxModel(const uint8_t* data, size_t size);
int FuzzYamlConfig(const uint8_t* data, size_t size);
int FuzzNpy(const uint8_t* data, size_t size);
int FuzzHttpRequest(const uint8_t* data, size_t size);

}  // namespace reprise::fuzz

// In a fuzz binary (REPRISE_FUZZ_MAIN defined to the entry point), libFuzzer's hook.
#ifdef REPRISE_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return reprise::fuzz::REPRISE_FUZZ_MAIN(data, size);
}
#endif

#endif  // REPRISE_TESTS_FUZZ_FUZZ_ENTRY_H_
