#include "tools/bench/reprise_bench/bench_options.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/base/status_macros.h"

namespace reprise::tools::bench {
namespace {

absl::Status IntFlag(absl::string_view name, absl::string_view value, int min, int* out) {
  if (!absl::SimpleAtoi(value, out) || *out < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " wants an integer >= ", min, ", got \"", value, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<double>> ParseSweep(absl::string_view text, absl::string_view what) {
  if (absl::StrContains(text, ',')) {
    std::vector<double> values;
    for (absl::string_view part : absl::StrSplit(text, ',')) {
      double v = 0;
      if (!absl::SimpleAtod(part, &v) || !std::isfinite(v) || v <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", what, " wants positive numbers, got \"", text, "\""));
      }
      values.push_back(v);
    }
    if (values.size() > 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", what, " \"", text, "\" has more than 1000 levels"));
    }
    return values;
  }
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", what, " wants A, A:B or A:B:STEP, got \"", text, "\""));
  }
  double v[3] = {0, 0, 1};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtod(parts[i], &v[i]) || !std::isfinite(v[i]) || v[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", what, " wants positive numbers, got \"", text, "\""));
    }
  }
  if (parts.size() == 1) v[1] = v[0];
  if (v[1] < v[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", what, " \"", text, "\": the end is below the start"));
  }
  std::vector<double> values;
  for (int i = 0; i <= 1000; ++i) {
    const double x = v[0] + v[2] * i;
    if (x > v[1] * (1 + 1e-9)) break;
    if (i == 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", what, " \"", text, "\" has more than 1000 levels"));
    }
    values.push_back(x);
  }
  return values;
}

absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text) {
  std::vector<int64_t> dims;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("x,"))) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad shape \"", text, "\" (want e.g. 1x3x224x224)"));
    }
    dims.push_back(d);
  }
  return dims;
}

absl::StatusOr<BenchOptions> ParseBenchArgs(const std::vector<std::string>& args) {
  BenchOptions o;
  bool have_concurrency = false, have_rate = false, addr_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    ASSIGN_OR_RETURN(bool connection_flag, ParseConnectionFlag(args, &i, &o.connection));
    if (connection_flag) continue;
    std::string flag = args[i], value;
    const size_t eq = flag.find('=');
    if (flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag == "--help" || flag == "-h") {
      o.help = true;
      return o;
    } else if (flag == "--no-progress") {
      o.progress = false;
      continue;
    } else if (flag == "--no-server-stats") {
      o.server_stats = false;
      continue;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag ", flag, " needs a value"));
    }
    if (flag == "--model" || flag == "-m") {
      o.model = value;
    } else if (flag == "--model-version") {
      o.version = value;
    } else if (flag == "--addr" || flag == "-u") {
      o.addr = value;
      addr_given = true;
    } else if (flag == "--protocol" || flag == "-i") {
      if (value != "grpc" && value != "http") {
        return absl::InvalidArgumentError(
            absl::StrCat("--protocol is grpc or http, got \"", value, "\""));
      }
      o.http = value == "http";
    } else if (flag == "--input-tensor-format" || flag == "--output-tensor-format") {
      if (value != "binary" && value != "json") {
        return absl::InvalidArgumentError(
            absl::StrCat(flag, " is binary or json, got \"", value, "\""));
      }
      (flag == "--input-tensor-format" ? o.binary_inputs : o.binary_outputs) = value == "binary";
    } else if (flag == "--input") {
      const size_t at = value.find('=');
      if (at == std::string::npos || at == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--input wants NAME=FILE.npy|random|zeros, got \"", value, "\""));
      }
      o.inputs.emplace_back(value.substr(0, at), value.substr(at + 1));
    } else if (flag == "--input-data") {
      if (value != "random" && value != "zeros") {
        return absl::InvalidArgumentError(
            absl::StrCat("--input-data is random or zeros, got \"", value, "\""));
      }
      o.input_data = value;
    } else if (flag == "--shape") {
      const size_t at = value.rfind('=');
      if (at == std::string::npos || at == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--shape wants NAME=DIMS, got \"", value, "\""));
      }
      ASSIGN_OR_RETURN(std::vector<int64_t> dims, ParseDims(value.substr(at + 1)));
      o.shapes.emplace_back(value.substr(0, at), std::move(dims));
    } else if (flag == "--batch-size" || flag == "-b") {
      RETURN_IF_ERROR(IntFlag("batch-size", value, 1, &o.batch_size));
    } else if (flag == "--concurrency" || flag == "--concurrency-range") {
      ASSIGN_OR_RETURN(o.levels, ParseSweep(value, "concurrency"));
      for (double c : o.levels) {
        if (c != std::floor(c) || c > 4096) {
          return absl::InvalidArgumentError(
              absl::StrCat("--concurrency wants integers up to 4096, got \"", value, "\""));
        }
      }
      o.load_mode = LoadMode::kConcurrency;
      have_concurrency = true;
    } else if (flag == "--request-rate" || flag == "--request-rate-range") {
      ASSIGN_OR_RETURN(o.levels, ParseSweep(value, "request-rate"));
      o.load_mode = LoadMode::kRequestRate;
      have_rate = true;
    } else if (flag == "--measurement-interval-ms" || flag == "-p") {
      RETURN_IF_ERROR(IntFlag("measurement-interval-ms", value, 10, &o.window_ms));
      o.window_mode = WindowMode::kTime;
    } else if (flag == "--measurement-request-count") {
      RETURN_IF_ERROR(IntFlag("measurement-request-count", value, 1, &o.window_requests));
      o.window_mode = WindowMode::kCount;
    } else if (flag == "--window-timeout-ms") {
      RETURN_IF_ERROR(IntFlag("window-timeout-ms", value, 10, &o.window_timeout_ms));
    } else if (flag == "--stability-percentage" || flag == "-s") {
      double pct = 0;
      if (!absl::SimpleAtod(value, &pct) || !(pct > 0) || pct > 100) {
        return absl::InvalidArgumentError(
            absl::StrCat("--stability-percentage wants (0, 100], got \"", value, "\""));
      }
      o.stability = pct / 100;
    } else if (flag == "--max-windows") {
      RETURN_IF_ERROR(IntFlag("max-windows", value, 3, &o.max_windows));
    } else if (flag == "--warmup-ms") {
      RETURN_IF_ERROR(IntFlag("warmup-ms", value, 0, &o.warmup_ms));
    } else if (flag == "--request-timeout-ms") {
      RETURN_IF_ERROR(IntFlag("request-timeout-ms", value, 1, &o.request_timeout_ms));
    } else if (flag == "--max-outstanding") {
      RETURN_IF_ERROR(IntFlag("max-outstanding", value, 1, &o.max_outstanding));
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value, &o.seed)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--seed wants an integer, got \"", value, "\""));
      }
    } else if (flag == "--csv") {
      o.csv_path = value;
    } else if (flag == "--json") {
      o.json_path = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag));
    }
  }
  if (o.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (have_concurrency && have_rate) {
    return absl::InvalidArgumentError("--concurrency and --request-rate exclude each other");
  }
  if (o.http && !addr_given) o.addr = "127.0.0.1:8000";
  if (o.http && have_rate) {
    return absl::InvalidArgumentError("--request-rate is not supported with --protocol http");
  }
  // Any gRPC target the user gives (a deployed server too); only an empty one is refused.
  if (o.addr.empty()) return absl::InvalidArgumentError("--addr is empty (want HOST:PORT)");
  return o;
}

std::string BenchUsage() {
  return std::string(R"(usage: reprise-bench --model M [options]
  --addr HOST:PORT             server, any gRPC target (default 127.0.0.1:8001; with
                               -i http, HOST:PORT of the HTTP endpoint, default :8000)
  -i, --protocol grpc|http     KServe v2 over gRPC (default) or HTTP/REST (concurrency mode;
                               one keep-alive connection per concurrent request)
  --input-tensor-format binary|json   HTTP: tensors in the body as binary data (default) or
  --output-tensor-format binary|json  JSON arrays
  --model-version V            model version (default: the server's)
  --input NAME=FILE.npy|random|zeros   data of one input (repeatable)
  --input-data random|zeros    data of the inputs not given by --input (default random)
  --shape NAME=1x64            full shape of a generated input (repeatable)
  -b, --batch-size N           batch (dimension 0) of generated inputs; a .npy with batch 1
                               is repeated N times (default 1)
  --concurrency A[:B[:STEP]]   requests in flight, a sweep or a list A,B,C (default 1)
  --request-rate A[:B[:STEP]]  requests per second, a sweep (instead of --concurrency)
  --max-outstanding N          request-rate mode: most requests in flight (default 256)
  --measurement-interval-ms T  time windows of T ms (default 1000)
  --measurement-request-count N  count windows of N completed requests instead
  --window-timeout-ms T        a count window ends after T ms at most (default 30000)
  --stability-percentage P     three consecutive windows agree within P% (default 10)
  --max-windows N              windows per level at most (default 10, >= 3)
  --warmup-ms T                unmeasured load before each level (default 1000)
  --request-timeout-ms T       deadline of each request (default 30000)
  --csv FILE, --json FILE      write the results
  --no-progress                no progress line on stderr
  --no-server-stats            do not ask the server for ModelStatistics
)") + std::string(ConnectionFlagsUsage());
}

}  // namespace reprise::tools::bench
