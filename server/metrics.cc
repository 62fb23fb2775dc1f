#include "server/metrics.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace reprise::server {
namespace {

using Labels = std::map<std::string, std::string>;

Labels ModelLabels(absl::string_view model, absl::string_view version) {
  return {{"model", std::string(model)}, {"version", std::string(version)}};
}

// Seconds from 100 us to a minute: serving latencies of small and large models.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1.0,   2.5,    5.0,   10.0, 30.0,  60.0};
}

prometheus::Histogram::BucketBoundaries LoadBuckets() {
  return {0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0};
}

prometheus::Histogram::BucketBoundaries BatchBuckets() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256};
}

}  // namespace

absl::string_view FailureReason(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "";
    case absl::StatusCode::kInvalidArgument:
      return "invalid_argument";
    case absl::StatusCode::kNotFound:
      return "not_found";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case absl::StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    default:
      return "internal";
  }
}

struct Metrics::Families {
  explicit Families(prometheus::Registry& r)
      : requests(prometheus::BuildCounter()
                     .Name("reprise_requests_total")
                     .Help("Inference requests finished, by outcome (success or failure) and, "
                           "for failures, reason")
                     .Register(r)),
        request_duration(prometheus::BuildHistogram()
                             .Name("reprise_request_duration_seconds")
                             .Help("Inference request duration in the server, from the start "
                                   "of its handling to its response, successes and failures")
                             .Register(r)),
        queue_duration(prometheus::BuildHistogram()
                           .Name("reprise_queue_duration_seconds")
                           .Help("Time an inference request waited for a stream or batch")
                           .Register(r)),
        compute_duration(prometheus::BuildHistogram()
                             .Name("reprise_compute_duration_seconds")
                             .Help("Compute time of an inference request by phase: input "
                                   "(decoding), infer (the model), output (encoding)")
                             .Register(r)),
        executions(prometheus::BuildCounter()
                       .Name("reprise_executions_total")
                       .Help("Model executions (one per batch run)")
                       .Register(r)),
        inferences(prometheus::BuildCounter()
                       .Name("reprise_inferences_total")
                       .Help("Inferences performed (the batch sizes of the executions summed)")
                       .Register(r)),
        batch_size(prometheus::BuildHistogram()
                       .Name("reprise_batch_size")
                       .Help("Inferences per model execution")
                       .Register(r)),
        load_duration(prometheus::BuildHistogram()
                          .Name("reprise_model_load_duration_seconds")
                          .Help("Time to load a model version, successful or not")
                          .Register(r)),
        load_failures(prometheus::BuildCounter()
                          .Name("reprise_model_load_failures_total")
                          .Help("Model version loads that failed")
                          .Register(r)) {}

  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& request_duration;
  prometheus::Family<prometheus::Histogram>& queue_duration;
  prometheus::Family<prometheus::Histogram>& compute_duration;
  prometheus::Family<prometheus::Counter>& executions;
  prometheus::Family<prometheus::Counter>& inferences;
  prometheus::Family<prometheus::Histogram>& batch_size;
  prometheus::Family<prometheus::Histogram>& load_duration;
  prometheus::Family<prometheus::Counter>& load_failures;
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      families_(std::make_unique<Families>(*registry_)) {}

Metrics::~Metrics() = default;

// The series of one (model, version) that every request touches, made once: a request then
// costs one map lookup instead of a label-set lookup (and a bucket list) per series.
struct Metrics::Series {
  prometheus::Histogram* request_duration = nullptr;
  prometheus::Counter* successes = nullptr;
  prometheus::Histogram* queue = nullptr;
  prometheus::Histogram* compute[3] = {nullptr, nullptr, nullptr};  // input, infer, output
  prometheus::Counter* executions = nullptr;
  prometheus::Counter* inferences = nullptr;
  prometheus::Histogram* batch_size = nullptr;
};

namespace {
constexpr const char* kPhases[3] = {"input", "infer", "output"};
}  // namespace

const Metrics::Series& Metrics::SeriesFor(absl::string_view model, absl::string_view version) {
  std::string key = absl::StrCat(model.size(), ":", model, version);
  std::lock_guard<std::mutex> lock(series_mu_);
  auto it = series_.find(key);
  if (it != series_.end()) return *it->second;
  // Families never drop a series, so the pointers stay valid for the registry's life.
  auto s = std::make_unique<Series>();
  Labels labels = ModelLabels(model, version);
  s->request_duration = &families_->request_duration.Add(labels, LatencyBuckets());
  s->queue = &families_->queue_duration.Add(labels, LatencyBuckets());
  s->executions = &families_->executions.Add(labels);
  s->inferences = &families_->inferences.Add(labels);
  s->batch_size = &families_->batch_size.Add(labels, BatchBuckets());
  for (int p = 0; p < 3; ++p) {
    Labels phase = labels;
    phase["phase"] = kPhases[p];
    s->compute[p] = &families_->compute_duration.Add(phase, LatencyBuckets());
  }
  labels["outcome"] = "success";
  labels["reason"] = "";
  s->successes = &families_->requests.Add(labels);
  return *series_.emplace(std::move(key), std::move(s)).first->second;
}

void Metrics::RecordRequest(absl::string_view model, absl::string_view version,
                            absl::StatusCode code, absl::Duration duration) {
  if (code == absl::StatusCode::kOk) {
    const Series& s = SeriesFor(model, version);
    s.request_duration->Observe(absl::ToDoubleSeconds(duration));
    s.successes->Increment();
    return;
  }
  // Failures (a request may name no known model): the label sets as they come.
  Labels labels = ModelLabels(model, version);
  families_->request_duration.Add(labels, LatencyBuckets())
      .Observe(absl::ToDoubleSeconds(duration));
  labels["outcome"] = "failure";
  labels["reason"] = std::string(FailureReason(code));
  families_->requests.Add(labels).Increment();
}

void Metrics::RecordQueue(absl::string_view model, absl::string_view version, absl::Duration wait) {
  SeriesFor(model, version).queue->Observe(absl::ToDoubleSeconds(wait));
}

void Metrics::RecordCompute(absl::string_view model, absl::string_view version,
                            const ComputeTimes& times) {
  const Series& s = SeriesFor(model, version);
  s.compute[0]->Observe(absl::ToDoubleSeconds(times.input));
  s.compute[1]->Observe(absl::ToDoubleSeconds(times.infer));
  s.compute[2]->Observe(absl::ToDoubleSeconds(times.output));
}

void Metrics::RecordExecution(absl::string_view model, absl::string_view version,
                              int64_t batch_size) {
  const Series& s = SeriesFor(model, version);
  s.executions->Increment();
  s.inferences->Increment(static_cast<double>(batch_size));
  s.batch_size->Observe(static_cast<double>(batch_size));
}

void Metrics::RecordLoad(absl::string_view model, absl::string_view version,
                         absl::Duration duration, bool ok) {
  const Labels labels = ModelLabels(model, version);
  families_->load_duration.Add(labels, LoadBuckets()).Observe(absl::ToDoubleSeconds(duration));
  if (!ok) {
    families_->load_failures.Add(labels).Increment();
    return;
  }
  families_->load_failures.Add(labels);
  Labels success = labels;
  success["outcome"] = "success";
  success["reason"] = "";
  families_->requests.Add(success);
  families_->executions.Add(labels);
  families_->inferences.Add(labels);
}

void Metrics::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  std::lock_guard<std::mutex> lock(mu_);
  collectables_.push_back(std::move(collectable));
}

std::vector<std::shared_ptr<prometheus::Collectable>> Metrics::Collectables() const {
  std::vector<std::shared_ptr<prometheus::Collectable>> out = {registry_};
  std::lock_guard<std::mutex> lock(mu_);
  out.insert(out.end(), collectables_.begin(), collectables_.end());
  return out;
}

std::string Metrics::Serialize() const { return SerializeMetrics(Collectables()); }

std::string SerializeMetrics(
    const std::vector<std::shared_ptr<prometheus::Collectable>>& collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace reprise::server
