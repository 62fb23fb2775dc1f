// RNN, GRU and LSTM (float32) in our own loops: forward, reverse and bidirectional, with
// sequence_lens, initial states, LSTM peepholes and input_forget, GRU's linear_before_reset,
// `clip`, the activation lists of the ONNX spec (with their alpha / beta) and both layouts
// (opset 14). oneDNN's RNN primitives are not used: they take no per-entry sequence lengths,
// no custom activations and no clip, all of which ONNX models may set.
//
// Steps past an entry's sequence length leave its state unchanged and write zeros to Y, so that
// Y_h / Y_c hold the state after the entry's last step (as ONNX Runtime computes them).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/kernel_util.h"
#include "runtime/base/status_macros.h"

namespace reprise::kernels::cpu {
namespace {

enum class Cell { kRnn, kGru, kLstm };

// One activation function of the spec with its parameters.
struct Activation {
  enum Kind {
    kRelu,
    kTanh,
    kSigmoid,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  } kind = kTanh;
  float alpha = 0;
  float beta = 0;

  float operator()(float x) const {
    switch (kind) {
      case kRelu:
        return std::max(x, 0.0f);
      case kTanh:
        return std::tanh(x);
      case kSigmoid:
        return 1.0f / (1.0f + std::exp(-x));
      case kAffine:
        return alpha * x + beta;
      case kLeakyRelu:
        return x >= 0 ? x : alpha * x;
      case kThresholdedRelu:
        return x > alpha ? x : 0.0f;
      case kScaledTanh:
        return alpha * std::tanh(beta * x);
      case kHardSigmoid:
        return std::clamp(alpha * x + beta, 0.0f, 1.0f);
      case kElu:
        return x >= 0 ? x : alpha * std::expm1(x);
      case kSoftsign:
        return x / (1.0f + std::fabs(x));
      case kSoftplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

// Builds activation `name`; consumes its alpha / beta from the lists (in the order the spec
// gives them, each with its default when the list has run out).
absl::StatusOr<Activation> MakeActivation(const PrepareContext& context, const std::string& name,
                                          const std::vector<float>& alphas, size_t* next_alpha,
                                          const std::vector<float>& betas, size_t* next_beta) {
  struct Spec {
    const char* name;
    Activation::Kind kind;
    bool has_alpha, has_beta;
    float alpha, beta;
  };
  static constexpr Spec kSpecs[] = {
      {"Relu", Activation::kRelu, false, false, 0, 0},
      {"Tanh", Activation::kTanh, false, false, 0, 0},
      {"Sigmoid", Activation::kSigmoid, false, false, 0, 0},
      {"Affine", Activation::kAffine, true, true, 1.0f, 0.0f},
      {"LeakyRelu", Activation::kLeakyRelu, true, false, 0.01f, 0},
      {"ThresholdedRelu", Activation::kThresholdedRelu, true, false, 1.0f, 0},
      {"ScaledTanh", Activation::kScaledTanh, true, true, 1.0f, 1.0f},
      {"HardSigmoid", Activation::kHardSigmoid, true, true, 0.2f, 0.5f},
      {"Elu", Activation::kElu, true, false, 1.0f, 0},
      {"Softsign", Activation::kSoftsign, false, false, 0, 0},
      {"Softplus", Activation::kSoftplus, false, false, 0, 0},
  };
  for (const Spec& spec : kSpecs) {
    if (absl::AsciiStrToLower(name) != absl::AsciiStrToLower(spec.name)) continue;
    Activation a;
    a.kind = spec.kind;
    a.alpha = spec.alpha;
    a.beta = spec.beta;
    if (spec.has_alpha && *next_alpha < alphas.size()) a.alpha = alphas[(*next_alpha)++];
    if (spec.has_beta && *next_beta < betas.size()) a.beta = betas[(*next_beta)++];
    return a;
  }
  return InvalidArgument(context, "activation \"", name, "\" is not known");
}

struct RecurrentSpec {
  Cell cell = Cell::kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;
  int gates = 1;
  bool reverse_only = false;
  bool batch_major = false;  // layout 1
  bool has_bias = false, has_lens = false, has_h0 = false, has_c0 = false, has_peep = false;
  bool linear_before_reset = false, input_forget = false;
  float clip = 0;                // 0: none
  int outputs = 1;               // how many outputs were prepared (Y, Y_h, Y_c)
  std::vector<Activation> acts;  // per direction: f (, g (, h))
};

float Clip(float x, float clip) { return clip > 0 ? std::clamp(x, -clip, clip) : x; }

// out[g] = sum_k x[k] * w[g, k] for the `rows` rows of w.
void MatVec(const float* w, const float* x, int64_t rows, int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float sum = 0;
    for (int64_t k = 0; k < cols; ++k) sum += row[k] * x[k];
    out[r] = sum;
  }
}

absl::Status RunRecurrent(const RecurrentSpec& s, const KernelArgs& args, const std::string& op) {
  const float* x = static_cast<const float*>(args.inputs[0]);
  const float* w_all = static_cast<const float*>(args.inputs[1]);
  const float* r_all = static_cast<const float*>(args.inputs[2]);
  const float* b_all = s.has_bias ? static_cast<const float*>(args.inputs[3]) : nullptr;
  const int32_t* lens = s.has_lens ? static_cast<const int32_t*>(args.inputs[4]) : nullptr;
  const float* h0 = s.has_h0 ? static_cast<const float*>(args.inputs[5]) : nullptr;
  const float* c0 = s.has_c0 ? static_cast<const float*>(args.inputs[6]) : nullptr;
  const float* p_all = s.has_peep ? static_cast<const float*>(args.inputs[7]) : nullptr;
  float* y = static_cast<float*>(args.outputs[0]);
  float* y_h = s.outputs > 1 ? static_cast<float*>(args.outputs[1]) : nullptr;
  float* y_c = s.outputs > 2 ? static_cast<float*>(args.outputs[2]) : nullptr;
  if (lens != nullptr) {
    for (int64_t b = 0; b < s.batch; ++b) {
      if (lens[b] < 0 || lens[b] > s.seq) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": sequence_lens[", b, "] = ", lens[b],
                                                       " is outside [0, ", s.seq, "]"));
      }
    }
  }
  const int64_t H = s.hidden, G = s.gates;
  if (y != nullptr) std::fill(y, y + s.seq * s.dirs * s.batch * H, 0.0f);
  std::vector<float> h(static_cast<size_t>(s.batch * H)), c(static_cast<size_t>(s.batch * H));
  std::vector<float> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H));
  std::vector<float> rh(static_cast<size_t>(H)), gate_h(static_cast<size_t>(H));
  std::vector<float> candidate(static_cast<size_t>(H)), reset_h(static_cast<size_t>(H));
  const size_t acts_per_dir = s.cell == Cell::kRnn ? 1 : s.cell == Cell::kGru ? 2 : 3;
  for (int64_t d = 0; d < s.dirs; ++d) {
    const bool reverse = s.reverse_only || d == 1;
    const float* w = w_all + d * G * H * s.input;
    const float* r = r_all + d * G * H * H;
    const float* wb = b_all != nullptr ? b_all + d * 2 * G * H : nullptr;
    const float* rb = wb != nullptr ? wb + G * H : nullptr;
    const float* p = p_all != nullptr ? p_all + d * 3 * H : nullptr;
    const Activation& f = s.acts[d * acts_per_dir];
    const Activation& g = s.acts[std::min(d * acts_per_dir + 1, s.acts.size() - 1)];
    const Activation& hact = s.acts[std::min(d * acts_per_dir + 2, s.acts.size() - 1)];
    for (int64_t b = 0; b < s.batch; ++b) {
      // Where entry b's state sits in initial_h / initial_c / Y_h / Y_c.
      const int64_t state_at = s.batch_major ? (b * s.dirs + d) * H : (d * s.batch + b) * H;
      for (int64_t k = 0; k < H; ++k) {
        h[b * H + k] = h0 != nullptr ? h0[state_at + k] : 0.0f;
        c[b * H + k] = c0 != nullptr ? c0[state_at + k] : 0.0f;
      }
    }
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t state_at = s.batch_major ? (b * s.dirs + d) * H : (d * s.batch + b) * H;
      const int64_t len = lens != nullptr ? lens[b] : s.seq;
      float* hb = h.data() + b * H;
      float* cb = c.data() + b * H;
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        const float* xt =
            s.batch_major ? x + (b * s.seq + t) * s.input : x + (t * s.batch + b) * s.input;
        MatVec(w, xt, G * H, s.input, xw.data());
        MatVec(r, hb, G * H, H, hr.data());
        auto bias = [&](int gate, int64_t k) {
          return wb != nullptr ? wb[gate * H + k] + rb[gate * H + k] : 0.0f;
        };
        if (s.cell == Cell::kRnn) {
          for (int64_t k = 0; k < H; ++k) hb[k] = f(Clip(xw[k] + hr[k] + bias(0, k), s.clip));
        } else if (s.cell == Cell::kGru) {
          // Gate order z, r, h.
          for (int64_t k = 0; k < H; ++k) {
            const float z = f(Clip(xw[k] + hr[k] + bias(0, k), s.clip));
            const float rg = f(Clip(xw[H + k] + hr[H + k] + bias(1, k), s.clip));
            gate_h[k] = z;
            rh[k] = rg;
          }
          if (s.linear_before_reset) {
            for (int64_t k = 0; k < H; ++k) {
              const float rbh = rb != nullptr ? rb[2 * H + k] : 0.0f;
              const float wbh = wb != nullptr ? wb[2 * H + k] : 0.0f;
              candidate[k] = g(Clip(xw[2 * H + k] + rh[k] * (hr[2 * H + k] + rbh) + wbh, s.clip));
            }
          } else {
            for (int64_t k = 0; k < H; ++k) reset_h[k] = rh[k] * hb[k];
            MatVec(r + 2 * H * H, reset_h.data(), H, H, candidate.data());
            for (int64_t k = 0; k < H; ++k) {
              candidate[k] = g(Clip(xw[2 * H + k] + candidate[k] + bias(2, k), s.clip));
            }
          }
          for (int64_t k = 0; k < H; ++k) {
            hb[k] = (1 - gate_h[k]) * candidate[k] + gate_h[k] * hb[k];
          }
        } else {
          // Gate order i, o, f, c; peepholes i, o, f.
          for (int64_t k = 0; k < H; ++k) {
            const float pi = p != nullptr ? p[k] * cb[k] : 0.0f;
            const float pf = p != nullptr ? p[2 * H + k] * cb[k] : 0.0f;
            const float i = f(Clip(xw[k] + hr[k] + pi + bias(0, k), s.clip));
            const float fg = s.input_forget
                                 ? 1 - i
                                 : f(Clip(xw[2 * H + k] + hr[2 * H + k] + pf + bias(2, k), s.clip));
            const float cc = g(Clip(xw[3 * H + k] + hr[3 * H + k] + bias(3, k), s.clip));
            cb[k] = fg * cb[k] + i * cc;
            const float po = p != nullptr ? p[H + k] * cb[k] : 0.0f;
            const float o = f(Clip(xw[H + k] + hr[H + k] + po + bias(1, k), s.clip));
            hb[k] = o * hact(cb[k]);
          }
        }
        if (y != nullptr) {
          float* yt = s.batch_major ? y + ((b * s.seq + t) * s.dirs + d) * H
                                    : y + ((t * s.dirs + d) * s.batch + b) * H;
          std::memcpy(yt, hb, static_cast<size_t>(H) * sizeof(float));
        }
      }
      if (y_h != nullptr) std::memcpy(y_h + state_at, hb, static_cast<size_t>(H) * sizeof(float));
      if (y_c != nullptr) std::memcpy(y_c + state_at, cb, static_cast<size_t>(H) * sizeof(float));
    }
  }
  return absl::OkStatus();
}

template <Cell kCell>
absl::StatusOr<std::unique_ptr<PreparedKernel>> PrepareRecurrent(const PrepareContext& context) {
  const size_t max_inputs = kCell == Cell::kLstm ? 8 : 6;
  RETURN_IF_ERROR(ExpectInputCount(context, 3, max_inputs));
  for (size_t i = 0; i < context.inputs.size(); ++i) {
    if (i == 4 || !HasInput(context, i)) continue;
    RETURN_IF_ERROR(ExpectType(context, i, {DataType::kFloat32}));
  }
  if (HasInput(context, 4)) RETURN_IF_ERROR(ExpectType(context, 4, {DataType::kInt32}));
  const Attributes& attrs = AttrsOf(context);
  RecurrentSpec s;
  s.cell = kCell;
  s.gates = kCell == Cell::kRnn ? 1 : kCell == Cell::kGru ? 3 : 4;
  ASSIGN_OR_RETURN(std::string direction, attrs.GetString("direction", "forward"));
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return InvalidArgument(context, "direction \"", direction, "\" is not known");
  }
  s.dirs = direction == "bidirectional" ? 2 : 1;
  s.reverse_only = direction == "reverse";
  ASSIGN_OR_RETURN(int64_t layout, attrs.GetInt("layout", 0));
  s.batch_major = layout == 1;
  ASSIGN_OR_RETURN(int64_t hidden, attrs.GetInt("hidden_size", 0));
  ASSIGN_OR_RETURN(s.clip, attrs.GetFloat("clip", 0.0f));
  if (s.clip < 0) return InvalidArgument(context, "clip must not be negative");
  ASSIGN_OR_RETURN(int64_t lbr, attrs.GetInt("linear_before_reset", 0));
  ASSIGN_OR_RETURN(int64_t input_forget, attrs.GetInt("input_forget", 0));
  s.linear_before_reset = lbr != 0;
  s.input_forget = input_forget != 0;
  RETURN_IF_ERROR(ExpectRank(context, 0, 3));
  RETURN_IF_ERROR(ExpectRank(context, 1, 3));
  RETURN_IF_ERROR(ExpectRank(context, 2, 3));
  const Shape& xs = context.inputs[0].shape;
  s.seq = s.batch_major ? xs[1] : xs[0];
  s.batch = s.batch_major ? xs[0] : xs[1];
  s.input = xs[2];
  const Shape& ws = context.inputs[1].shape;
  if (hidden <= 0) hidden = ws[1] / s.gates;
  s.hidden = hidden;
  const int64_t gh = s.gates * hidden;
  auto expect = [&](size_t i, const Shape& shape, const char* what) -> absl::Status {
    if (context.inputs[i].shape != shape) {
      return InvalidArgument(context, what, " must be ", runtime::ShapeToString(shape), ", got ",
                             runtime::ShapeToString(context.inputs[i].shape));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(expect(1, {s.dirs, gh, s.input}, "W"));
  RETURN_IF_ERROR(expect(2, {s.dirs, gh, hidden}, "R"));
  const Shape state =
      s.batch_major ? Shape{s.batch, s.dirs, hidden} : Shape{s.dirs, s.batch, hidden};
  s.has_bias = HasInput(context, 3);
  if (s.has_bias) RETURN_IF_ERROR(expect(3, {s.dirs, 2 * gh}, "B"));
  s.has_lens = HasInput(context, 4);
  if (s.has_lens) RETURN_IF_ERROR(expect(4, {s.batch}, "sequence_lens"));
  s.has_h0 = HasInput(context, 5);
  if (s.has_h0) RETURN_IF_ERROR(expect(5, state, "initial_h"));
  if (kCell == Cell::kLstm) {
    s.has_c0 = HasInput(context, 6);
    if (s.has_c0) RETURN_IF_ERROR(expect(6, state, "initial_c"));
    s.has_peep = HasInput(context, 7);
    if (s.has_peep) RETURN_IF_ERROR(expect(7, {s.dirs, 3 * hidden}, "P"));
  }
  // Activations: the spec's defaults per cell, or the list (per direction, in order).
  std::vector<std::string> names;
  if (const runtime::AttributeValue* list = attrs.Find("activations"); list != nullptr) {
    const auto* strings = std::get_if<std::vector<std::string>>(list);
    if (strings == nullptr) return InvalidArgument(context, "activations must be strings");
    names = *strings;
  } else {
    const std::vector<std::string> defaults =
        kCell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
        : kCell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                              : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int64_t d = 0; d < s.dirs; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  }
  const size_t per_dir = static_cast<size_t>(s.gates == 1 ? 1 : s.gates == 3 ? 2 : 3);
  if (names.size() != per_dir * static_cast<size_t>(s.dirs)) {
    return InvalidArgument(context, "activations must name ", per_dir * s.dirs, " functions, got ",
                           names.size());
  }
  ASSIGN_OR_RETURN(std::vector<float> alphas, attrs.GetFloats("activation_alpha", {}));
  ASSIGN_OR_RETURN(std::vector<float> betas, attrs.GetFloats("activation_beta", {}));
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(Activation a,
                     MakeActivation(context, name, alphas, &next_alpha, betas, &next_beta));
    s.acts.push_back(a);
  }
  std::vector<TensorDesc> outputs;
  const Shape y_shape =
      s.batch_major ? Shape{s.batch, s.seq, s.dirs, hidden} : Shape{s.seq, s.dirs, s.batch, hidden};
  outputs.push_back(Desc(DataType::kFloat32, y_shape));
  if (context.num_outputs > 1) outputs.push_back(Desc(DataType::kFloat32, state));
  if (kCell == Cell::kLstm && context.num_outputs > 2) {
    outputs.push_back(Desc(DataType::kFloat32, state));
  }
  s.outputs = static_cast<int>(outputs.size());
  const std::string op = NodeLabel(context);
  return MakeKernel(context, std::move(outputs),
                    [s, op](const KernelArgs& args) { return RunRecurrent(s, args, op); });
}

}  // namespace

absl::Status RegisterRecurrentKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("RNN", &PrepareRecurrent<Cell::kRnn>));
  RETURN_IF_ERROR(registry->Register("GRU", &PrepareRecurrent<Cell::kGru>));
  RETURN_IF_ERROR(registry->Register("LSTM", &PrepareRecurrent<Cell::kLstm>));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
