#include "runtime/engine/stream_session.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <span>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/steady_clock.h"
#include "runtime/core/capture.h"
#include "runtime/core/string_tensor.h"
#include "runtime/engine/control_flow.h"
#include "runtime/engine/split_session.h"

namespace reprise::runtime::engine {
namespace {

// The values of a small tensor (a value-key candidate) as text that tells distinct values
// apart: integers in full, floats with enough digits to round-trip.
std::string ValueText(const TensorValue& value) {
  const int64_t n = NumElements(value.shape);
  std::vector<std::string> parts;
  parts.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = value.bytes.data() + static_cast<size_t>(i) * DataTypeSize(value.dtype);
    switch (value.dtype) {
      case DataType::kInt32: {
        int32_t v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrCat(v));
        break;
      }
      case DataType::kInt64: {
        int64_t v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrCat(v));
        break;
      }
      case DataType::kFloat32: {
        float v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrFormat("%.9g", v));
        break;
      }
      case DataType::kFloat64: {
        double v;
        std::memcpy(&v, p, sizeof(v));
        parts.push_back(absl::StrFormat("%.17g", v));
        break;
      }
      case DataType::kBool:  // the byte itself: a key must tell every value apart
        parts.push_back(absl::StrCat(static_cast<int>(*p)));
        break;
      default:
        parts.push_back("?");
    }
  }
  return absl::StrCat("(", absl::StrJoin(parts, ","), ")");
}

}  // namespace

std::string ShapeSignature(const std::vector<NamedTensor>& inputs) {
  std::string signature;
  for (const NamedTensor& input : inputs) {
    if (!signature.empty()) signature.push_back(';');
    absl::StrAppend(&signature, input.name, ":", ShapeToString(input.value.shape));
  }
  return signature;
}

// Bytes held in an InstanceBudget, given back when the hold goes. Move-only.
class BudgetHold {
 public:
  BudgetHold() = default;
  BudgetHold(InstanceBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
  BudgetHold(BudgetHold&& other) noexcept { *this = std::move(other); }
  BudgetHold& operator=(BudgetHold&& other) noexcept {
    Reset();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    return *this;
  }
  ~BudgetHold() { Reset(); }
  void Reset() {
    if (budget_ != nullptr && bytes_ > 0) budget_->Release(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
  }

 private:
  InstanceBudget* budget_ = nullptr;
  uint64_t bytes_ = 0;
};

// Evicted signatures whose statistics a session keeps beyond its live plans (their state
// "evicted"); older ones are forgotten, so that clients sweeping shapes cannot grow the map.
constexpr size_t kMinRememberedSignatures = 64;

// One signature: its plan, its instance (null when it runs eagerly) and its statistics.
// The plan and the instance are used by the one running thread only; the instance pointer and
// the statistics are also read by ListInstances / DumpInstance, so they change under Impl::mu.
// An evicted entry keeps only its statistics (plan and instance null).
struct Entry {
  std::unique_ptr<ExecutionPlan> plan;  // declared before `ri`: outlives it
  // The plan relocated into device memory (StreamSession's "Staging"); null on host memory.
  // Declared after `plan` (it borrows the plan's kernels) and before `ri` (which records it).
  std::unique_ptr<DevicePlan> device_plan;
  std::unique_ptr<ModelRI> ri;
  BudgetHold owned;  // the plan's owned bytes (ExecutionPlan::owned_bytes) in the budget
  StreamInstanceInfo info;
  uint64_t last_use = 0;        // Impl::use_seq at the last run (LRU order)
  bool capture_failed = false;  // never capture this signature again
};

struct StreamSession::Impl {
  std::shared_ptr<const Model> model;
  Device* device = nullptr;
  ExecMode mode = ExecMode::kReplay;
  StreamSessionOptions options;
  std::vector<std::string> input_names;  // graph order
  bool value_keyed = false;              // touched by the running thread only
  std::unique_ptr<Stream> stream;
  // Device plans (StreamSession's "Staging"): set at Create, with the model's constants on the
  // device that they share.
  bool on_device = false;
  std::shared_ptr<const DeviceConstants> constants;
  // Where the bodies of If and Loop nodes are captured (made on the first such capture).
  BodyStreams body_streams{nullptr};
  // Where a plan's parallel regions fork while capturing (branch_plan.h).
  BranchStreams branch_streams{nullptr};
  // A model cut at its value-dependent nodes: its parts' sessions (null otherwise), and whether
  // the cut failed where the whole model ran (touched by the running thread only).
  std::unique_ptr<StreamSession> split_prefix;
  std::unique_ptr<StreamSession> split_tail;
  bool split_off = false;
  // std::mutex rather than absl::Mutex (TSan, docs/development.md).
  mutable std::mutex mu;
  absl::flat_hash_map<std::string, std::unique_ptr<Entry>> entries ABSL_GUARDED_BY(mu);
  StreamSessionCounters counters ABSL_GUARDED_BY(mu);
  uint64_t use_seq ABSL_GUARDED_BY(mu) = 0;
  // The arena this stream's plans share (they run one at a time and intermediates live only
  // within a run), sized for the largest plan so far. A larger plan brings a larger arena; the
  // old one lives on while older plans still use it. Each arena holds its bytes of the budget
  // until it is freed. Touched by the running thread only.
  std::shared_ptr<AlignedBuffer> arena;

  // The key of `ordered`'s plan: names and shapes, and the values of value-keyed inputs (small
  // ones as text, whole inputs as their bytes). `display` gets the same without raw bytes.
  std::string Signature(const std::vector<const TensorValue*>& ordered,
                        std::string* display = nullptr) const;
  // The live entry for the inputs' signature, made (planned, and captured when `capture`) if
  // needed. Over the memory budget the plan goes to `*transient` instead of the cache. `inputs`
  // are the run's inputs (`ordered` may carry only their types and shapes), for ChooseThreads.
  absl::StatusOr<Entry*> FindOrMake(const std::vector<const TensorValue*>& ordered,
                                    const ValidatedInputs& inputs, StreamRunInfo* info,
                                    bool capture, std::unique_ptr<Entry>* transient);
  // Evicts least recently used plans (never `keep`) until one more of `bytes` fits the count
  // bound and the budget (reserving the bytes). False when the budget cannot be met.
  bool MakeRoom(uint64_t bytes, const Entry* keep, StreamRunInfo* info);
  bool EvictLru(const Entry* keep);
  // Forgets the oldest evicted signatures beyond the bound (kMinRememberedSignatures, or four
  // times max_instances when that is more).
  void ForgetEvicted() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // A new arena of `bytes` whose bytes (already reserved by MakeRoom) return to the budget
  // when the last plan using it goes (at once, when it cannot be allocated).
  absl::StatusOr<std::shared_ptr<AlignedBuffer>> NewArena(uint64_t bytes) const;
  // counters.arena_bytes / live_bytes: the bytes of the distinct arenas of the cached plans,
  // and those plus the plans' own buffers.
  void RecountBytes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Captures the plan's steps; on success stores the instance, else marks the entry eager.
  void Capture(Entry* entry, StreamRunInfo* info);
  // StreamSessionOptions::choose_threads: `plan`, or a plan for the same inputs with fewer
  // threads that ran clearly faster on them. `note` gets the timings (empty when none were
  // taken). Never fails: a plan that cannot be timed is kept as it is.
  std::unique_ptr<ExecutionPlan> ChooseThreads(const std::vector<const TensorValue*>& ordered,
                                               const ValidatedInputs& inputs, bool keyed,
                                               std::unique_ptr<ExecutionPlan> plan,
                                               std::string* note);
  // Runs every step in the stream's order and waits; the error names the node.
  absl::Status RunEager(const ExecutionPlan& plan);
  // StreamSessionOptions::settle_budget_ns: replays `ri` (just captured from `plan`, its inputs
  // staged) until the plan's kernels have chosen, within the budget; counts them in `info`.
  absl::Status Settle(const ExecutionPlan& plan, ModelRI& ri, StreamRunInfo* info);
  // Device plans: relocates `plan` (UNIMPLEMENTED names what cannot run on the device); runs
  // it eagerly and waits. (Capture records a device plan's copies and steps.)
  absl::StatusOr<std::unique_ptr<DevicePlan>> Place(const ExecutionPlan& plan,
                                                    absl::string_view signature) const;
  absl::Status RunDevicePlan(const DevicePlan& plan);
  void MarkEager(Entry* entry, absl::string_view reason, StreamRunInfo* info);
};

bool InstanceBudget::TryReserve(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (limit_ > 0 && used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

std::string StreamSession::Impl::Signature(const std::vector<const TensorValue*>& ordered,
                                           std::string* display) const {
  std::string signature;
  if (display != nullptr) display->clear();
  for (size_t i = 0; i < ordered.size(); ++i) {
    const std::string shape =
        absl::StrCat(i > 0 ? ";" : "", input_names[i], ":", ShapeToString(ordered[i]->shape));
    signature += shape;
    if (display != nullptr) *display += shape;
    if (!value_keyed || !model->IsValueKeyCandidate(*ordered[i])) continue;
    if (NumElements(ordered[i]->shape) <= Model::kMaxValueKeyElements) {
      const std::string text = absl::StrCat("=", ValueText(*ordered[i]));
      signature += text;
      if (display != nullptr) *display += text;
    } else {
      // A whole input keys the plan (a model planned per input value) by a 64-bit hash of its
      // bytes, of the process's own seed (absl::Hash), which a client cannot aim at. The plan
      // holds the bytes it was made for and refuses others when staged (StageViewInto), so a
      // hash that collides fails that run, never runs another input's plan. The bytes in the
      // key cost a copy per request, and byte-by-byte FNV-1a for the instance list 84-106 ms
      // (a cut detector's tail, keyed by 54 MB of its frontier).
      const uint64_t digest = absl::HashOf(absl::string_view(
          reinterpret_cast<const char*>(ordered[i]->bytes.data()), ordered[i]->bytes.size()));
      signature.push_back('=');
      signature.append(reinterpret_cast<const char*>(&digest), sizeof digest);
      if (display != nullptr) {
        // The same hash, folded to 32 bits, tells the entries apart in the list.
        absl::StrAppend(display, "=<", ordered[i]->bytes.size(), " bytes #",
                        absl::Hex(static_cast<uint32_t>(digest ^ (digest >> 32)), absl::kZeroPad8),
                        ">");
      }
    }
  }
  return signature;
}

void StreamSession::Impl::MarkEager(Entry* entry, absl::string_view reason, StreamRunInfo* info) {
  std::lock_guard<std::mutex> lock(mu);
  entry->ri.reset();
  entry->info.state = "eager";
  entry->info.reason = std::string(reason);
  entry->capture_failed = true;
  counters.capture_failures += 1;
  info->capture_failed = true;
  info->capture_error = std::string(reason);
}

absl::StatusOr<std::shared_ptr<AlignedBuffer>> StreamSession::Impl::NewArena(uint64_t bytes) const {
  InstanceBudget* budget = options.budget;
  absl::StatusOr<AlignedBuffer> buffer = AlignedBuffer::Allocate(bytes);
  if (!buffer.ok()) {
    if (budget != nullptr) budget->Release(bytes);
    return buffer.status();
  }
  return std::shared_ptr<AlignedBuffer>(new AlignedBuffer(*std::move(buffer)),
                                        [budget](AlignedBuffer* a) {
                                          if (budget != nullptr) budget->Release(a->size());
                                          delete a;
                                        });
}

void StreamSession::Impl::ForgetEvicted() {
  const size_t bound = std::max(kMinRememberedSignatures,
                                4 * static_cast<size_t>(std::max(options.max_instances, 0)));
  while (entries.size() > bound) {
    auto oldest = entries.end();
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->second->plan != nullptr) continue;
      if (oldest == entries.end() || it->second->last_use < oldest->second->last_use) oldest = it;
    }
    if (oldest == entries.end()) return;  // every entry is live: the instance bound holds them
    entries.erase(oldest);
  }
}

void StreamSession::Impl::RecountBytes() {
  std::vector<const AlignedBuffer*> seen;
  uint64_t total = 0;
  uint64_t owned = 0;
  for (const auto& [signature, entry] : entries) {
    if (entry->plan == nullptr) continue;
    owned += entry->plan->owned_bytes();
    const AlignedBuffer* a = entry->plan->arena().get();
    if (std::find(seen.begin(), seen.end(), a) != seen.end()) continue;
    seen.push_back(a);
    total += a->size();
  }
  counters.arena_bytes = total;
  counters.live_bytes = total + owned;
}

bool StreamSession::Impl::EvictLru(const Entry* keep) {
  std::lock_guard<std::mutex> lock(mu);
  auto victim_it = entries.end();
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    const Entry* entry = it->second.get();
    if (entry == keep || entry->plan == nullptr) continue;
    if (victim_it == entries.end() || entry->last_use < victim_it->second->last_use) {
      victim_it = it;
    }
  }
  if (victim_it == entries.end()) return false;
  Entry* victim = victim_it->second.get();
  victim->ri.reset();  // before the plan whose buffers it binds
  victim->device_plan.reset();
  victim->plan.reset();  // frees its arena (and that arena's budget) if no other plan uses it
  victim->owned.Reset();
  if (!victim->capture_failed) {
    victim->info.state = "evicted";
    victim->info.reason = "freed by the instance bound or the memory budget";
  }
  // Keys of whole inputs (a model planned per input value) are not kept for their statistics:
  // such an input seldom comes again, and the map would grow by one key per input.
  if (model->keyed_by_all_values()) entries.erase(victim_it);
  RecountBytes();
  counters.live_instances -= 1;
  counters.evictions += 1;
  return true;
}

bool StreamSession::Impl::MakeRoom(uint64_t bytes, const Entry* keep, StreamRunInfo* info) {
  while (options.max_instances > 0) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (counters.live_instances < static_cast<uint64_t>(options.max_instances)) break;
    }
    if (!EvictLru(keep)) break;
    info->evictions += 1;
  }
  if (options.budget == nullptr) return true;
  while (!options.budget->TryReserve(bytes)) {
    if (!EvictLru(keep)) return false;
    info->evictions += 1;
  }
  return true;
}

void StreamSession::Impl::Capture(Entry* entry, StreamRunInfo* info) {
  const int64_t start = SteadyNowNs();
  absl::Status status = BeginCapture(stream.get(), CaptureMode::kThreadLocal);
  if (!status.ok()) {
    info->capture_ns = SteadyNowNs() - start;
    MarkEager(entry, absl::StrCat("begin capture: ", status.message()), info);
    return;
  }
  absl::Status launch;
  if (entry->device_plan != nullptr) {
    // The H2D copies from pinned memory, the steps and the D2H copies, as one instance.
    launch = entry->device_plan->Enqueue(stream.get());
  } else {
    // If and Loop steps record conditional tasks, their bodies captured on the body streams.
    CaptureScope scope;
    scope.root = GetCaptureInfo(stream.get()).instance;
    scope.bodies = &body_streams;
    scope.mode = CaptureMode::kThreadLocal;
    scope.branches = &branch_streams;
    launch = EnqueuePlan(*entry->plan, stream.get(), &scope);
  }
  if (!launch.ok()) {
    launch = absl::Status(launch.code(), absl::StrCat("recording ", launch.message()));
  }
  // EndCapture in every case, so that the stream leaves the capture.
  absl::StatusOr<std::unique_ptr<ModelRI>> ri = EndCapture(stream.get());
  info->capture_ns = SteadyNowNs() - start;
  if (!launch.ok()) {
    MarkEager(entry, launch.message(), info);
    return;
  }
  if (!ri.ok()) {
    MarkEager(entry, absl::StrCat("end capture: ", ri.status().message()), info);
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  entry->ri = *std::move(ri);
  entry->info.state = "captured";
  entry->info.reason.clear();
  entry->info.captures += 1;
  entry->info.capture_ns = info->capture_ns;
  counters.captures += 1;
  info->captured = true;
}

namespace {

int64_t Median(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::string Millis(int64_t ns) { return absl::StrFormat("%.2f ms", static_cast<double>(ns) / 1e6); }

std::string Threads(int threads) {
  return absl::StrCat(threads, threads == 1 ? " thread" : " threads");
}

// Timing runs a session spends on choosing a plan's threads: about this long per pair of plans,
// in 3 to 9 rounds.
constexpr int64_t kChooseBudgetNs = 30'000'000;
// A plan of fewer threads whose first warm run takes more than this many times the current
// plan's is not timed further (GoogLeNet at batch 1 on two cores: 12.8 ms on one thread, 8.7 ms
// on two).
constexpr double kChooseThreadsGiveUp = 1.25;

}  // namespace

bool ClearlyFaster(std::vector<int64_t> candidate_ns, std::vector<int64_t> current_ns,
                   double margin) {
  if (candidate_ns.empty() || current_ns.empty()) return false;
  const double fastest_candidate =
      static_cast<double>(*std::min_element(candidate_ns.begin(), candidate_ns.end()));
  const double fastest_current =
      static_cast<double>(*std::min_element(current_ns.begin(), current_ns.end()));
  return static_cast<double>(Median(std::move(candidate_ns))) <
             margin * static_cast<double>(Median(std::move(current_ns))) &&
         fastest_candidate < margin * fastest_current;
}

std::unique_ptr<ExecutionPlan> StreamSession::Impl::ChooseThreads(
    const std::vector<const TensorValue*>& ordered, const ValidatedInputs& inputs, bool keyed,
    std::unique_ptr<ExecutionPlan> plan, std::string* note) {
  note->clear();
  // A plan without steps (every output computed while planning, as for a model planned per input
  // value) has no run whose threads matter, and each plan of fewer threads would compute the
  // whole graph again.
  if (!options.choose_threads || plan->intra_op_threads() <= 1 || plan->steps().empty()) {
    return plan;
  }
  // The run's own inputs (the views: `ordered` may hold only types and shapes).
  auto stage = [&inputs](ExecutionPlan& p) -> absl::Status {
    for (size_t i = 0; i < inputs.size(); ++i) RETURN_IF_ERROR(p.StageView(i, inputs[i]).status());
    return absl::OkStatus();
  };
  // One run on this thread (the stream is idle: the same OpenMP team as the replays).
  auto timed = [this](const ExecutionPlan& p) -> absl::StatusOr<int64_t> {
    const int64_t start = SteadyNowNs();
    RETURN_IF_ERROR(RunEager(p));
    const int64_t measured = SteadyNowNs() - start;
    return options.choose_threads_clock
               ? options.choose_threads_clock(p.intra_op_threads(), measured)
               : measured;
  };
  auto timing = [](int threads, int64_t ns, size_t runs) {
    return absl::StrCat(Threads(threads), " ", Millis(ns), " (", runs,
                        runs == 1 ? " run)" : " runs)");
  };
  // A warm-up run, then one to size the trial; a plan that fails here is left to the run that
  // follows, which reports the error.
  if (!stage(*plan).ok() || !timed(*plan).ok()) return plan;
  absl::StatusOr<int64_t> once = timed(*plan);
  if (!once.ok() || *once > options.choose_threads_max_run_ns) return plan;
  const int rounds =
      static_cast<int>(std::clamp<int64_t>(kChooseBudgetNs / std::max<int64_t>(*once, 1), 3, 9));
  const uint64_t plan_bytes = plan->arena_bytes() + plan->owned_bytes();
  std::vector<std::string> timings = {timing(plan->intra_op_threads(), *once, 1)};
  int64_t current = *once;  // the current plan's time: one run, then the median of its trial
  for (int threads = plan->intra_op_threads() / 2; threads >= 1; threads /= 2) {
    // The trial plan's bytes come from the budget while it lives.
    if (options.budget != nullptr && !options.budget->TryReserve(plan_bytes)) break;
    BudgetHold hold(options.budget, options.budget != nullptr ? plan_bytes : 0);
    bool candidate_keyed = keyed;
    absl::StatusOr<std::unique_ptr<ExecutionPlan>> candidate =
        model->PlanForInputs(ordered, &candidate_keyed, threads);
    if (!candidate.ok() || candidate_keyed != keyed || !stage(**candidate).ok() ||
        !timed(**candidate).ok()) {
      break;
    }
    // A warm run far slower than the current plan's ends the search at once.
    absl::StatusOr<int64_t> first = timed(**candidate);
    if (!first.ok()) break;
    if (static_cast<double>(*first) > kChooseThreadsGiveUp * static_cast<double>(current)) {
      timings.push_back(timing(threads, *first, 1));
      break;
    }
    std::vector<int64_t> current_ns, candidate_ns;
    for (int r = 0; r < rounds; ++r) {
      absl::StatusOr<int64_t> a = timed(*plan);
      absl::StatusOr<int64_t> b = timed(**candidate);
      if (!a.ok() || !b.ok()) break;
      current_ns.push_back(*a);
      candidate_ns.push_back(*b);
    }
    if (current_ns.size() < static_cast<size_t>(rounds)) break;
    const int64_t candidate_median = Median(candidate_ns);
    timings.back() = timing(plan->intra_op_threads(), Median(current_ns), current_ns.size());
    timings.push_back(timing(threads, candidate_median, candidate_ns.size()));
    if (!ClearlyFaster(std::move(candidate_ns), std::move(current_ns))) break;
    plan = *std::move(candidate);
    current = candidate_median;
  }
  if (timings.size() > 1) {
    *note = absl::StrCat(absl::StrJoin(timings, ", "), ": ", plan->intra_op_threads());
  }
  return plan;
}

absl::StatusOr<Entry*> StreamSession::Impl::FindOrMake(
    const std::vector<const TensorValue*>& ordered, const ValidatedInputs& inputs,
    StreamRunInfo* info, bool capture, std::unique_ptr<Entry>* transient) {
  std::string display;
  std::string signature = Signature(ordered, &display);
  Entry* existing = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(signature);
    if (it != entries.end()) {
      if (it->second->plan != nullptr) return it->second.get();
      existing = it->second.get();  // evicted: plan (and capture) again
    }
  }
  const int64_t start = SteadyNowNs();
  bool keyed = value_keyed;
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan, model->PlanForInputs(ordered, &keyed));
  info->plan_ns = SteadyNowNs() - start;
  info->planned = true;
  if (keyed) {
    std::lock_guard<std::mutex> lock(mu);
    counters.value_plans += 1;
  }
  if (keyed && !value_keyed) {
    value_keyed = true;
    signature = Signature(ordered, &display);
    existing = nullptr;
    std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(signature);
    if (it != entries.end()) return it->second.get();  // cannot happen: keys were all unkeyed
  }
  std::string threads_choice;
  if (!on_device) {
    const int64_t choose_start = SteadyNowNs();
    plan = ChooseThreads(ordered, inputs, keyed, std::move(plan), &threads_choice);
    info->choose_ns = SteadyNowNs() - choose_start;
  }
  const int plan_threads = plan->intra_op_threads();
  const uint64_t bytes = plan->arena_bytes();
  const uint64_t owned = plan->owned_bytes();
  if (options.budget != nullptr && options.budget->limit() > 0 &&
      bytes + owned > options.budget->limit()) {
    std::lock_guard<std::mutex> lock(mu);
    counters.budget_refusals += 1;
    return absl::ResourceExhaustedError(absl::StrCat(
        "the plan for ", display, " needs ", bytes + owned,
        " bytes, more than the whole capture.memory_budget_bytes (", options.budget->limit(), ")"));
  }
  // Share the stream's arena when it is large enough; otherwise this plan needs a new one (and
  // the stream lets go of the old one, so that evicting the plans using it frees it).
  const bool fits = arena != nullptr && arena->size() >= bytes;
  if (!fits) arena.reset();
  if (!MakeRoom((fits ? 0 : bytes) + owned, existing, info)) {
    // Over the budget even with this session's other plans gone (other streams and models hold
    // it): run once on the plan's own buffers and cache nothing. Such a plan lives only during
    // this run and is bounded by limits.max_plan_bytes.
    *transient = std::make_unique<Entry>();
    if (on_device) {
      ASSIGN_OR_RETURN((*transient)->device_plan, Place(*plan, display));
    }
    (*transient)->plan = std::move(plan);
    (*transient)->info.shape_signature = display;
    (*transient)->info.intra_op_threads = plan_threads;
    (*transient)->info.threads_choice = std::move(threads_choice);
    info->transient = true;
    std::lock_guard<std::mutex> lock(mu);
    counters.budget_refusals += 1;
    return transient->get();
  }
  // MakeRoom reserved both: `owned` goes with the entry, `bytes` with the new arena.
  BudgetHold owned_hold(options.budget, owned);
  if (!fits) {
    ASSIGN_OR_RETURN(arena, NewArena(bytes));
  }
  RETURN_IF_ERROR(plan->UseArena(arena));
  std::unique_ptr<DevicePlan> placed;
  if (on_device) {
    ASSIGN_OR_RETURN(placed, Place(*plan, display));
  }
  Entry* raw = existing;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (raw == nullptr) {
      auto entry = std::make_unique<Entry>();
      entry->info.shape_signature = display;
      if (!ordered.empty() && !ordered[0]->shape.empty()) {
        entry->info.batch_rows = ordered[0]->shape[0];
      }
      raw = entry.get();
      entries.emplace(std::move(signature), std::move(entry));
    }
    raw->plan = std::move(plan);
    raw->device_plan = std::move(placed);
    raw->owned = std::move(owned_hold);
    raw->last_use = ++use_seq;  // newest: never the one forgotten
    ForgetEvicted();
    raw->info.arena_bytes = bytes;
    raw->info.intra_op_threads = plan_threads;
    raw->info.threads_choice = std::move(threads_choice);
    counters.live_instances += 1;
    RecountBytes();
    if (mode == ExecMode::kEager) {
      raw->info.state = "eager";
      raw->info.reason = "eager mode";
    } else if (!capture && !raw->capture_failed) {
      raw->info.state = "eager";
      raw->info.reason = "not captured (e.g. a batch above the largest capture bucket)";
    } else if (!raw->capture_failed) {
      raw->info.state = "capturing";
    }
  }
  if (mode == ExecMode::kReplay && capture && !raw->capture_failed) Capture(raw, info);
  return raw;
}

absl::Status StreamSession::Impl::RunEager(const ExecutionPlan& plan) {
  // The whole plan as one host function in the stream's order, on this thread when the stream
  // is idle: the plan's buffers are host memory (see the class comment) and its steps run as a
  // stream worker would run them, so nothing is handed off to be waited for. Errors name the
  // node.
  return stream->RunHostFuncAndWait(
      [](void* p) { return static_cast<const ExecutionPlan*>(p)->RunSteps(); },
      const_cast<ExecutionPlan*>(&plan));
}

absl::Status StreamSession::Impl::Settle(const ExecutionPlan& plan, ModelRI& ri,
                                         StreamRunInfo* info) {
  if (options.settle_budget_ns <= 0) return absl::OkStatus();
  const int64_t start = SteadyNowNs();
  // The replays read the same staged inputs (no step writes over them): the outputs read after
  // them are the last replay's.
  while (info->settle_runs < StreamSessionOptions::kMaxSettleRuns && plan.settling_runs() > 0 &&
         SteadyNowNs() - start < options.settle_budget_ns) {
    RETURN_IF_ERROR(ri.Execute(stream.get()));
    ++info->settle_runs;
  }
  info->settle_ns = SteadyNowNs() - start;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DevicePlan>> StreamSession::Impl::Place(
    const ExecutionPlan& plan, absl::string_view signature) const {
  absl::StatusOr<std::unique_ptr<DevicePlan>> placed =
      DevicePlan::Create(*model, plan, device, constants);
  if (!placed.ok()) {
    return absl::Status(placed.status().code(),
                        absl::StrCat("the plan for ", signature, " cannot run on ", device->name(),
                                     ": ", placed.status().message()));
  }
  return placed;
}

absl::Status StreamSession::Impl::RunDevicePlan(const DevicePlan& plan) {
  absl::Status enqueued = plan.Enqueue(stream.get());
  absl::Status done = stream->Synchronize();  // also after a failed enqueue: nothing pending
  return enqueued.ok() ? done : enqueued;
}

StreamSession::StreamSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StreamSession::~StreamSession() {
  // Nothing is pending after a Run returns, but make sure before the plans go.
  if (impl_ != nullptr && impl_->stream != nullptr) impl_->stream->Synchronize().IgnoreError();
  // The arenas return their bytes to the budget as the plans (and `arena`) go.
}

absl::StatusOr<std::unique_ptr<StreamSession>> StreamSession::Create(
    std::shared_ptr<const Model> model, Device* device, ExecMode mode,
    StreamSessionOptions options) {
  if (model == nullptr) return absl::InvalidArgumentError("stream session: no model");
  if (device == nullptr) return absl::InvalidArgumentError("stream session: no device");
  auto impl = std::make_unique<Impl>();
  impl->model = std::move(model);
  impl->device = device;
  impl->mode = mode;
  impl->options = options;
  for (const Value& input : impl->model->inputs()) impl->input_names.push_back(input.name);
  absl::StatusOr<std::unique_ptr<Stream>> stream = device->CreateStream();
  if (!stream.ok()) {
    return absl::Status(stream.status().code(),
                        absl::StrCat("stream session on ", device->name(),
                                     ": cannot create a stream: ", stream.status().message()));
  }
  impl->stream = *std::move(stream);
  impl->body_streams = BodyStreams(device);
  impl->on_device = options.device_plans || !device->host_memory();
  if (impl->on_device) {
    impl->constants = options.device_constants;
    if (impl->constants == nullptr) {
      absl::StatusOr<std::shared_ptr<const DeviceConstants>> constants =
          DeviceConstants::Create(*impl->model, device);
      if (!constants.ok()) {
        return absl::Status(
            constants.status().code(),
            absl::StrCat("stream session on ", device->name(),
                         ": the model's constants: ", constants.status().message()));
      }
      impl->constants = *std::move(constants);
    }
  }
  impl->branch_streams = BranchStreams(device);
  if (const Model::SplitModels* split = impl->model->value_split();
      split != nullptr && !impl->on_device) {
    // The tail's plans hold their inputs' bytes (the values they were made for), and a new
    // input seldom comes again:
    // the latest alone is kept (a second one kept for its packed weights gained nothing on
    // fasterrcnn_mobilenet_v3_large_320_fpn and cost retinanet_resnet50_fpn 160 MB).
    StreamSessionOptions tail_options = options;
    tail_options.max_instances = options.max_instances > 0 ? std::min(options.max_instances, 1) : 1;
    auto prefix = Create(split->prefix, device, mode, options);
    auto tail = Create(split->tail, device, mode, tail_options);
    if (prefix.ok() && tail.ok()) {  // else the whole model runs
      impl->split_prefix = *std::move(prefix);
      impl->split_tail = *std::move(tail);
    }
  }
  return std::unique_ptr<StreamSession>(new StreamSession(std::move(impl)));
}

absl::StatusOr<std::vector<NamedTensor>> StreamSession::Run(const std::vector<NamedTensor>& inputs,
                                                            StreamRunInfo* info, bool capture) {
  ASSIGN_OR_RETURN(ValidatedInputs validated, impl_->model->Validate(inputs));
  std::vector<NamedTensor> outputs;
  RETURN_IF_ERROR(Run(
      validated,
      [&outputs](size_t, const PlanTensor& out) {
        // Strings are copied out too: their views point into the plan or the staged inputs.
        outputs.push_back(NamedTensor{out.name, CopyTensorValue(out.dtype, out.shape, out.data)});
        return absl::OkStatus();
      },
      info, capture));
  return outputs;
}

absl::Status StreamSession::Run(const ValidatedInputs& inputs, OutputVisitor visit,
                                StreamRunInfo* info, bool capture) {
  Impl& s = *impl_;
  if (s.split_prefix == nullptr || s.split_off) return RunWhole(inputs, visit, info, capture);
  bool visited = false;
  absl::Status split = RunSplitModel(*s.model, *s.split_prefix, *s.split_tail, inputs, visit, info,
                                     capture, &visited);
  if (split.ok() || visited) return split;  // an error while handing the outputs over is final
  // The same error from the whole model is the one to report; if the whole model runs, the cut
  // is what failed (e.g. a part that cannot be planned from shapes), and it is not tried again.
  RETURN_IF_ERROR(RunWhole(inputs, visit, info, capture));
  s.split_off = true;
  return absl::OkStatus();
}

absl::Status StreamSession::RunWhole(const ValidatedInputs& inputs, OutputVisitor visit,
                                     StreamRunInfo* info, bool capture) {
  StreamRunInfo local;
  StreamRunInfo* out_info = info != nullptr ? info : &local;
  *out_info = StreamRunInfo{};
  Impl& s = *impl_;
  // What keys and plans need: each input's type and shape, and the values of the value-key
  // candidates (small, or every input of a model planned per value), gathered when the caller
  // has no whole value.
  std::vector<TensorValue> gathered(inputs.size());
  std::vector<const TensorValue*> ordered(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputView& view = inputs[i];
    if (view.value != nullptr) {
      ordered[i] = view.value;
      continue;
    }
    TensorValue& carrier = gathered[i];
    carrier.dtype = view.dtype;
    carrier.shape = view.shape;
    if (s.model->IsValueKeyCandidate(carrier)) {
      carrier.bytes.assign(static_cast<size_t>(NumElements(view.shape)) * DataTypeSize(view.dtype),
                           0);
      size_t at = 0;
      for (const auto& piece : view.pieces) {
        if (piece.size() > carrier.bytes.size() - at) {
          return absl::InvalidArgumentError(absl::StrCat("input \"", s.input_names[i],
                                                         "\" has more bytes than its shape ",
                                                         ShapeToString(view.shape), " holds"));
        }
        std::memcpy(carrier.bytes.data() + at, piece.data(), piece.size());
        at += piece.size();
      }
    }
    ordered[i] = &carrier;
  }
  std::unique_ptr<Entry> transient;
  ASSIGN_OR_RETURN(Entry * entry, s.FindOrMake(ordered, inputs, out_info, capture, &transient));
  ExecutionPlan& plan = *entry->plan;
  DevicePlan* placed = entry->device_plan.get();  // null on host memory

  const int64_t start = SteadyNowNs();
  uint64_t staged = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSIGN_OR_RETURN(size_t bytes, placed != nullptr ? placed->StageView(i, inputs[i])
                                                     : plan.StageView(i, inputs[i]));
    staged += bytes;
  }

  // Only this thread replaces entry->ri, so reading it without the lock is safe here.
  ModelRI* ri = entry->ri.get();
  bool ran = false;
  if (ri != nullptr) {
    // On the calling thread when the stream is idle (the CPU backend): no hand-off to wait on.
    absl::Status status = ri->Execute(s.stream.get());
    bool first_replay;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      first_replay = entry->info.replays == 0;
      if (status.ok()) {
        entry->info.replays += 1;
        s.counters.replays += 1;
      }
    }
    if (status.ok()) {
      ran = true;
      out_info->replayed = true;
      if (out_info->captured && placed == nullptr) RETURN_IF_ERROR(s.Settle(plan, *ri, out_info));
    } else if (first_replay) {
      s.MarkEager(entry, absl::StrCat("first replay: ", status.message()), out_info);
      out_info->captured = false;
    } else {
      return status;
    }
  }
  if (!ran) {
    RETURN_IF_ERROR(placed != nullptr ? s.RunDevicePlan(*placed) : s.RunEager(plan));
    out_info->eager = true;
    std::lock_guard<std::mutex> lock(s.mu);
    entry->info.eager_runs += 1;
    s.counters.eager_runs += 1;
  }

  const std::vector<PlanTensor>& outputs = placed != nullptr ? placed->outputs() : plan.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) RETURN_IF_ERROR(visit(i, outputs[i]));
  out_info->run_ns = SteadyNowNs() - start;
  std::lock_guard<std::mutex> lock(s.mu);
  entry->info.last_used_ms = absl::ToUnixMillis(absl::Now());
  entry->last_use = ++s.use_seq;
  s.counters.staged_bytes += staged;
  return absl::OkStatus();
}

std::vector<StreamInstanceInfo> StreamSession::ListInstances() const {
  std::vector<StreamInstanceInfo> list;
  for (const StreamSession* part : {impl_->split_prefix.get(), impl_->split_tail.get()}) {
    if (part == nullptr) continue;
    for (StreamInstanceInfo& info : part->ListInstances()) {
      info.part = part == impl_->split_prefix.get() ? "prefix" : "tail";
      list.push_back(std::move(info));
    }
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    list.reserve(impl_->entries.size());
    for (const auto& [signature, entry] : impl_->entries) list.push_back(entry->info);
  }
  std::sort(list.begin(), list.end(), [](const StreamInstanceInfo& a, const StreamInstanceInfo& b) {
    return a.shape_signature < b.shape_signature;
  });
  return list;
}

absl::StatusOr<std::string> StreamSession::DumpInstance(absl::string_view shape_signature,
                                                        bool verbose) const {
  for (const StreamSession* part : {impl_->split_prefix.get(), impl_->split_tail.get()}) {
    if (part == nullptr) continue;
    for (const StreamInstanceInfo& instance : part->ListInstances()) {
      if (instance.shape_signature == shape_signature) {
        return part->DumpInstance(shape_signature, verbose);
      }
    }
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->entries.find(shape_signature);
  if (it == impl_->entries.end()) {  // a key with raw bytes: look it up by what is shown
    it = std::find_if(impl_->entries.begin(), impl_->entries.end(), [&](const auto& e) {
      return e.second->info.shape_signature == shape_signature;
    });
  }
  if (it == impl_->entries.end()) {
    return absl::NotFoundError(absl::StrCat("no instance for signature \"", shape_signature, "\" (",
                                            impl_->entries.size(), " signature(s) seen)"));
  }
  const Entry& entry = *it->second;
  if (entry.plan == nullptr) {
    return absl::NotFoundError(absl::StrCat("the instance for signature \"", shape_signature,
                                            "\" was evicted (", entry.info.reason,
                                            "); the next run of that shape makes it again"));
  }
  if (entry.ri == nullptr) {
    return absl::NotFoundError(absl::StrCat("signature \"", shape_signature,
                                            "\" runs eagerly, no instance: ", entry.info.reason));
  }
  return entry.ri->DumpJson(verbose ? DumpFlags::kVerbose : DumpFlags::kSummary);
}

StreamSessionCounters StreamSession::counters() const {
  StreamSessionCounters total;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    total = impl_->counters;
  }
  for (const StreamSession* part : {impl_->split_prefix.get(), impl_->split_tail.get()}) {
    if (part != nullptr) AddCounters(part->counters(), &total);
  }
  return total;
}

ExecMode StreamSession::mode() const { return impl_->mode; }

const Model& StreamSession::model() const { return *impl_->model; }

bool StreamSession::device_plans() const { return impl_->on_device; }

}  // namespace reprise::runtime::engine
