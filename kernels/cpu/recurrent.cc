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
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/ascii.h"
#include "kernels/cpu/families.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/base/status_macros.h"
#include "runtime/core/checked_size.h"

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
  int threads = 1;               // intra-op threads of the products
  int64_t chunk = 1;             // time steps whose input products are computed at once
  // R^T of each direction ([dirs, H, G*H]) when R was known at Prepare: the state products
  // read it row by row (sgemm without a transposed operand, about 1.4x faster for one entry).
  std::shared_ptr<const std::vector<float>> r_packed;
  BroadcastPlan r_transpose;  // one direction's R [G*H, H] read as R^T [H, G*H] (CopyStrided)
  // Per direction, when W or R was known at Prepare, oneDNN matmuls that read it packed (sgemm
  // packs its B again on every call; PreparePackedProducts says where): the input products of a
  // whole chunk and of the last, shorter one (with one product for all entries), and the state
  // products of all units (GRU without linear_before_reset: of z and r, and of the candidate).
  struct Packed {
    std::shared_ptr<const PackedProduct> x_chunk, x_tail, state, candidate;
  };
  std::vector<Packed> packed;
  int64_t scratch_floats = 0;  // the largest scratchpad of a direction's matmuls
};

// The workspace, in floats: the input products of `chunk` steps of every entry, the state
// products of one step, h (twice), c and a scratch row per entry, the summed biases and, when
// R was not known at Prepare, this direction's R^T.
struct Workspace {
  float* xw;       // [batch, chunk, G*H] or, with one product for all entries, [chunk, batch, G*H]
  float* hr;       // [batch, G*H]
  float* h;        // [batch, H]
  float* h_next;   // [batch, H]: a step reads h and writes h_next, then they swap
  float* c;        // [batch, H]
  float* tmp;      // [batch, H]
  float* bias;     // [G*H]
  float* rt;       // [H, G*H] (absent with r_packed)
  float* scratch;  // the matmuls' scratchpad (scratch_floats)
};

// The floats of the workspace for `s`, or nullopt on overflow.
std::optional<int64_t> WorkspaceFloats(const RecurrentSpec& s) {
  const int64_t gh = s.gates * s.hidden;
  int64_t xw = 0, rows = 0, states = 0, total = 0;
  if (!runtime::CheckedMul(s.batch, s.chunk, &rows) || !runtime::CheckedMul(rows, gh, &xw) ||
      !runtime::CheckedMul(s.batch, gh + 4 * s.hidden, &states) ||
      !runtime::CheckedAdd(xw, states, &total) || !runtime::CheckedAdd(total, gh, &total)) {
    return std::nullopt;
  }
  int64_t rt = 0;
  if (s.r_packed == nullptr &&
      (!runtime::CheckedMul(gh, s.hidden, &rt) || !runtime::CheckedAdd(total, rt, &total))) {
    return std::nullopt;
  }
  // The scratchpad starts on a 64-byte line (a direction's floats are rounded up to 16).
  if (!runtime::CheckedAdd(total, s.scratch_floats, &total) ||
      !runtime::CheckedAdd(total, int64_t{15}, &total)) {
    return std::nullopt;
  }
  return total / 16 * 16;
}

Workspace SplitWorkspace(const RecurrentSpec& s, void* base) {
  const int64_t gh = s.gates * s.hidden, H = s.hidden;
  Workspace w;
  w.xw = static_cast<float*>(base);
  w.hr = w.xw + s.batch * s.chunk * gh;
  w.h = w.hr + s.batch * gh;
  w.h_next = w.h + s.batch * H;
  w.c = w.h_next + s.batch * H;
  w.tmp = w.c + s.batch * H;
  w.bias = w.tmp + s.batch * H;
  w.rt = w.bias + gh;
  w.scratch = w.rt + (s.r_packed == nullptr ? gh * H : 0);
  w.scratch += (16 - (w.scratch - w.xw) % 16) % 16;
  return w;
}

// v[k] = a(clip(v[k])) for k < n: Sigmoid and Tanh vectorised, the others one by one.
void Activate(const Activation& a, float clip, float* v, int64_t n) {
  if (clip > 0) {
    for (int64_t k = 0; k < n; ++k) v[k] = std::clamp(v[k], -clip, clip);
  }
  switch (a.kind) {
    case Activation::kSigmoid:
      SigmoidArray(v, v, n);
      return;
    case Activation::kTanh:
      TanhArray(v, v, n);
      return;
    default:
      for (int64_t k = 0; k < n; ++k) v[k] = a(v[k]);
  }
}

// io[k] += a[k] + b[k] for k < n.
void AddTwo(const float* __restrict a, const float* __restrict b, float* __restrict io, int64_t n) {
  for (int64_t k = 0; k < n; ++k) io[k] += a[k] + b[k];
}

// The multiply-adds of a step's state products (entries x G*H x H) from which sgemm runs them on
// two threads faster than on one (AVX-512 VM, one entry, medians in us one thread -> two: 128x512
// 3.6 -> 6.4, 192x576 6.2 -> 5.4, 256x512 5.8 -> 5.2, 256x768 11.6 -> 8.0, 320x960 20.0 -> 11.2).
constexpr double kThreadedProductMacs = 131072;

// The weights (H x G*H) from which R is packed for the state products, and from which one entry's
// product runs on the row kernel (PackedProduct): R is read once per step, so the row kernel's
// one stream per panel pays off below its default 2^18 weights.
constexpr int64_t kStateRowKernelMinWeights = int64_t{1} << 17;

// The work of a step (units x unit_cost, roughly ns) from which it is split over its units: a
// step is a fork and join of its own, many per run, so it splits later than other loops (the
// bound ParallelFor had when the step's choices above were measured).
constexpr double kStepSplitWork = 65536;

// The cells step by step. Per direction (both at once when bidirectional with two threads), the
// input products X_t W^T of `chunk` steps of every entry are one sgemm (one per entry when entries
// have their own time ranges: sequence_lens, or batch-major input) on every intra-op thread. Each
// step is split over the hidden units when it is large enough for several threads
// (ParallelForStatus): a range of units takes its rows of every gate's R times all entries' states
// (one product when it is all units), then its gates' sums, clip and activations (vectorised) and
// its part of the new state. GRU without linear_before_reset takes two passes, since its candidate
// multiplies r (.) h.
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
  const int64_t H = s.hidden, G = s.gates, GH = G * H;
  if (y != nullptr) std::fill(y, y + s.seq * s.dirs * s.batch * H, 0.0f);
  auto len_of = [&](int64_t b) { return lens != nullptr ? int64_t{lens[b]} : s.seq; };
  int64_t max_len = 0;
  for (int64_t b = 0; b < s.batch; ++b) max_len = std::max(max_len, len_of(b));
  // One input product for all entries when their time steps coincide and sit in one block of
  // rows of X (time-major without sequence_lens): xw rows are then [step][entry].
  const bool one_product = lens == nullptr && !s.batch_major;
  const bool gru_two_products = s.cell == Cell::kGru && !s.linear_before_reset;
  // Rough ns per unit of a step: its G rows of R times every entry's state, at about four
  // multiply-adds per ns (a product with few entries streams R from the cache).
  const double unit_cost = static_cast<double>(s.batch) * static_cast<double>(GH) / 4.0;
  const double step_macs =
      static_cast<double>(s.batch) * static_cast<double>(GH) * static_cast<double>(H);
  const size_t acts_per_dir = s.cell == Cell::kRnn ? 1 : s.cell == Cell::kGru ? 2 : 3;
  // Direction d with its own workspace on `threads` threads.
  auto run_direction = [&](int64_t d, const Workspace& ws, int threads) -> absl::Status {
    UseIntraOpThreads(threads);
    // The threads a step is split over: from kStepSplitWork, as many as ParallelFor starts for H
    // units of unit_cost, or one (then its products may use the threads, below).
    const int step_threads = static_cast<double>(H) * unit_cost >= kStepSplitWork
                                 ? ParallelTeam(H, threads, unit_cost)
                                 : 1;
    std::fill(ws.tmp, ws.tmp + s.batch * H, 0.0f);
    std::vector<int64_t> t_lo(static_cast<size_t>(s.batch));
    const bool reverse = s.reverse_only || d == 1;
    const float* w = w_all + d * GH * s.input;
    const float* rt = ws.rt;  // R^T
    if (s.r_packed != nullptr) {
      rt = s.r_packed->data() + d * GH * H;
    } else {
      CopyStrided(s.r_transpose, r_all + d * GH * H, ws.rt);
    }
    const RecurrentSpec::Packed* packed = s.packed.empty() ? nullptr : &s.packed[d];
    const float* wb = b_all != nullptr ? b_all + d * 2 * GH : nullptr;
    const float* rb = wb != nullptr ? wb + GH : nullptr;
    const float* p = p_all != nullptr ? p_all + d * 3 * H : nullptr;
    const Activation& f = s.acts[d * acts_per_dir];
    const Activation& g = s.acts[std::min(d * acts_per_dir + 1, s.acts.size() - 1)];
    const Activation& hact = s.acts[std::min(d * acts_per_dir + 2, s.acts.size() - 1)];
    // Both biases of every gate, except R's bias of GRU's candidate with linear_before_reset
    // (it is added to the state product before the reset gate multiplies it).
    for (int64_t k = 0; k < GH; ++k) {
      const bool keep_r = !(s.cell == Cell::kGru && s.linear_before_reset && k >= 2 * H);
      ws.bias[k] = wb != nullptr ? wb[k] + (keep_r ? rb[k] : 0.0f) : 0.0f;
    }
    auto state_at = [&](int64_t b) {
      return s.batch_major ? (b * s.dirs + d) * H : (d * s.batch + b) * H;
    };
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t k = 0; k < H; ++k) {
        ws.h[b * H + k] = h0 != nullptr ? h0[state_at(b) + k] : 0.0f;
        ws.c[b * H + k] = c0 != nullptr ? c0[state_at(b) + k] : 0.0f;
      }
    }
    float* h_prev = ws.h;
    float* h_next = ws.h_next;
    for (int64_t s0 = 0; s0 < max_len; s0 += s.chunk) {
      const int64_t s1 = std::min(s0 + s.chunk, max_len);
      // Input products of steps [s0, s1): entry b's time steps there are t_lo[b] onwards.
      if (one_product) {
        const int64_t steps = s1 - s0;
        const int64_t t0 = reverse ? s.seq - s1 : s0;
        const float* xt = x + t0 * s.batch * s.input;
        const PackedProduct* product = nullptr;
        if (packed != nullptr) {
          product = steps == s.chunk ? packed->x_chunk.get() : packed->x_tail.get();
        }
        if (product != nullptr) {
          RETURN_IF_ERROR(product->Run(xt, ws.xw, ws.scratch));
        } else {
          RETURN_IF_ERROR(Sgemm(false, true, steps * s.batch, GH, s.input, 1.0f, xt, s.input, w,
                                s.input, 0.0f, ws.xw, GH));
        }
        for (int64_t b = 0; b < s.batch; ++b) t_lo[b] = t0;
      } else {
        for (int64_t b = 0; b < s.batch; ++b) {
          const int64_t len = len_of(b), end = std::min(s1, len);
          if (end <= s0) continue;
          t_lo[b] = reverse ? len - end : s0;
          const float* xb = s.batch_major ? x + (b * s.seq + t_lo[b]) * s.input
                                          : x + (t_lo[b] * s.batch + b) * s.input;
          const int64_t ldx = s.batch_major ? s.input : s.batch * s.input;
          RETURN_IF_ERROR(Sgemm(false, true, end - s0, GH, s.input, 1.0f, xb, ldx, w, s.input, 0.0f,
                                ws.xw + b * s.chunk * GH, GH));
        }
      }
      // A step worth several threads is split over its units (ParallelForStatus), each range's
      // products on one thread; a smaller one runs here, its products on the stream's threads
      // (sgemm's or the packed product's own split of the columns) from kThreadedProductMacs.
      UseIntraOpThreads(step_threads == 1 && step_macs >= kThreadedProductMacs ? threads : 1);
      for (int64_t step = s0; step < s1; ++step) {
        auto active = [&](int64_t b) { return step < len_of(b); };
        auto time_of = [&](int64_t b) { return reverse ? len_of(b) - 1 - step : step; };
        auto xw_row = [&](int64_t b) {
          const int64_t j = time_of(b) - t_lo[b];
          return ws.xw + (one_product ? j * s.batch + b : b * s.chunk + j) * GH;
        };
        // hr[:, g*H + k0 .. g*H + k1) = a R[g*H + k0 .. g*H + k1)^T for the gates [g0, g1):
        // one product when the units are all of them (the gates' columns of R^T are then
        // contiguous).
        auto products = [&](const float* a, int64_t g0, int64_t g1, int64_t k0,
                            int64_t k1) -> absl::Status {
          if (k0 == 0 && k1 == H && packed != nullptr) {
            const PackedProduct* all = g0 == 0 ? packed->state.get() : packed->candidate.get();
            if (all != nullptr) return all->Run(a, ws.hr + g0 * H, ws.scratch);
          }
          if (k0 == 0 && k1 == H) {
            return Sgemm(false, false, s.batch, (g1 - g0) * H, H, 1.0f, a, H, rt + g0 * H, GH, 0.0f,
                         ws.hr + g0 * H, GH);
          }
          for (int64_t gate = g0; gate < g1; ++gate) {
            RETURN_IF_ERROR(Sgemm(false, false, s.batch, k1 - k0, H, 1.0f, a, H, rt + gate * H + k0,
                                  GH, 0.0f, ws.hr + gate * H + k0, GH));
          }
          return absl::OkStatus();
        };
        // Units [k0, k1) of every entry: their state products, then their gates and new state
        // (into h_next; c in place). With GRU's two products this stops at r (.) h.
        auto first_phase = [&](int64_t k0, int64_t k1) -> absl::Status {
          RETURN_IF_ERROR(products(h_prev, 0, gru_two_products ? 2 : G, k0, k1));
          const int64_t n = k1 - k0;
          const size_t bytes = static_cast<size_t>(n) * sizeof(float);
          for (int64_t b = 0; b < s.batch; ++b) {
            const float* hp = h_prev + b * H + k0;
            float* hn = h_next + b * H + k0;
            if (!active(b)) {
              std::memcpy(hn, hp, bytes);
              continue;
            }
            const float* xr = xw_row(b) + k0;
            const float* bias = ws.bias + k0;
            float* pre = ws.hr + b * GH + k0;  // the gates' sums, then their values, in place
            if (s.cell == Cell::kRnn) {
              AddTwo(xr, bias, pre, n);
              Activate(f, s.clip, pre, n);
              std::memcpy(hn, pre, bytes);
            } else if (s.cell == Cell::kGru) {
              // Gate order z, r, h.
              float* z = pre;
              float* rg = pre + H;
              AddTwo(xr, bias, z, n);
              AddTwo(xr + H, bias + H, rg, n);
              Activate(f, s.clip, z, n);
              Activate(f, s.clip, rg, n);
              if (gru_two_products) {
                float* rh = ws.tmp + b * H + k0;
                for (int64_t k = 0; k < n; ++k) rh[k] = rg[k] * hp[k];
              } else {
                float* cand = pre + 2 * H;
                for (int64_t k = 0; k < n; ++k) {
                  const float rbh = rb != nullptr ? rb[2 * H + k0 + k] : 0.0f;
                  cand[k] = xr[2 * H + k] + bias[2 * H + k] + rg[k] * (cand[k] + rbh);
                }
                Activate(g, s.clip, cand, n);
                for (int64_t k = 0; k < n; ++k) hn[k] = (1 - z[k]) * cand[k] + z[k] * hp[k];
              }
            } else {
              // Gate order i, o, f, c; peepholes i, o, f. o needs the new c, so it comes last.
              float* gi = pre;
              float* go = pre + H;
              float* gf = pre + 2 * H;
              float* gc = pre + 3 * H;
              for (int64_t gate = 0; gate < 4; ++gate) {
                AddTwo(xr + gate * H, bias + gate * H, pre + gate * H, n);
              }
              float* cb = ws.c + b * H + k0;
              if (p != nullptr) {
                for (int64_t k = 0; k < n; ++k) {
                  gi[k] += p[k0 + k] * cb[k];
                  gf[k] += p[2 * H + k0 + k] * cb[k];
                }
              }
              Activate(f, s.clip, gi, n);
              if (s.input_forget) {
                for (int64_t k = 0; k < n; ++k) gf[k] = 1 - gi[k];
              } else {
                Activate(f, s.clip, gf, n);
              }
              Activate(g, s.clip, gc, n);
              for (int64_t k = 0; k < n; ++k) cb[k] = gf[k] * cb[k] + gi[k] * gc[k];
              if (p != nullptr) {
                for (int64_t k = 0; k < n; ++k) go[k] += p[H + k0 + k] * cb[k];
              }
              Activate(f, s.clip, go, n);
              float* hc = ws.tmp + b * H + k0;
              std::memcpy(hc, cb, bytes);
              Activate(hact, 0.0f, hc, n);
              for (int64_t k = 0; k < n; ++k) hn[k] = go[k] * hc[k];
            }
          }
          return absl::OkStatus();
        };
        // GRU without linear_before_reset: the candidate's product (r (.) h) R_h^T needs every
        // unit's r first, so it is a second pass over the units.
        auto second_phase = [&](int64_t k0, int64_t k1) -> absl::Status {
          RETURN_IF_ERROR(products(ws.tmp, 2, 3, k0, k1));
          const int64_t n = k1 - k0;
          for (int64_t b = 0; b < s.batch; ++b) {
            if (!active(b)) continue;
            float* pre = ws.hr + b * GH + k0;
            float* cand = pre + 2 * H;
            AddTwo(xw_row(b) + 2 * H + k0, ws.bias + 2 * H + k0, cand, n);
            Activate(g, s.clip, cand, n);
            const float* hp = h_prev + b * H + k0;
            float* hn = h_next + b * H + k0;
            for (int64_t k = 0; k < n; ++k) hn[k] = (1 - pre[k]) * cand[k] + pre[k] * hp[k];
          }
          return absl::OkStatus();
        };
        RETURN_IF_ERROR(ParallelForStatus(H, step_threads, unit_cost, first_phase));
        if (gru_two_products)
          RETURN_IF_ERROR(ParallelForStatus(H, step_threads, unit_cost, second_phase));
        std::swap(h_prev, h_next);
        if (y != nullptr) {
          for (int64_t b = 0; b < s.batch; ++b) {
            if (!active(b)) continue;
            const int64_t t = time_of(b);
            float* yt = s.batch_major ? y + ((b * s.seq + t) * s.dirs + d) * H
                                      : y + ((t * s.dirs + d) * s.batch + b) * H;
            std::memcpy(yt, h_prev + b * H, static_cast<size_t>(H) * sizeof(float));
          }
        }
      }
      UseIntraOpThreads(threads);  // for the next chunk's input products
    }
    for (int64_t b = 0; b < s.batch; ++b) {
      const size_t bytes = static_cast<size_t>(H) * sizeof(float);
      if (y_h != nullptr) std::memcpy(y_h + state_at(b), h_prev + b * H, bytes);
      if (y_c != nullptr) std::memcpy(y_c + state_at(b), ws.c + b * H, bytes);
    }
    return absl::OkStatus();
  };
  // The two directions of a bidirectional cell are independent: with two threads or more they
  // run at once, one thread each (each writes its own half of Y, Y_h and Y_c).
  const int64_t per_dir = *WorkspaceFloats(s);
  auto workspace = [&](int64_t d) {
    return SplitWorkspace(s, static_cast<float*>(args.workspace) + d * per_dir);
  };
  if (s.dirs == 2 && s.threads >= 2) {
    // Rough ns per direction: its products at about eight multiply-adds per ns.
    const double cost = static_cast<double>(max_len) * static_cast<double>(s.batch) *
                        static_cast<double>(GH) * static_cast<double>(s.input + H) / 8.0;
    return ParallelForStatus(
        2, 2, cost,
        [&](int64_t d0, int64_t d1) -> absl::Status {
          for (int64_t d = d0; d < d1; ++d) RETURN_IF_ERROR(run_direction(d, workspace(d), 1));
          return absl::OkStatus();
        },
        /*grain=*/1);
  }
  for (int64_t d = 0; d < s.dirs; ++d) RETURN_IF_ERROR(run_direction(d, workspace(d), s.threads));
  return absl::OkStatus();
}

// The packed matmuls of `s` (RecurrentSpec::Packed) for the weights known at Prepare, where they
// beat sgemm: the input products when all entries share one (time-major, no sequence_lens), the
// state products of all units. Directions without any keep sgemm (s->packed stays empty).
absl::Status PreparePackedProducts(const PrepareContext& context, RecurrentSpec* s) {
  const auto* w = static_cast<const float*>(context.inputs[1].data);
  const auto* r = static_cast<const float*>(context.inputs[2].data);
  const int64_t H = s->hidden, GH = s->gates * H;
  const bool one_product = !s->has_lens && !s->batch_major;
  // GRU without linear_before_reset multiplies z and r's rows of R first, the candidate's after.
  const int64_t first_gates = s->cell == Cell::kGru && !s->linear_before_reset ? 2 : s->gates;
  std::vector<RecurrentSpec::Packed> packed(static_cast<size_t>(s->dirs));
  bool any = false;
  size_t scratch = 0;
  auto keep = [&](std::shared_ptr<const PackedProduct> product) {
    if (product != nullptr) {
      any = true;
      scratch = std::max(scratch, product->scratch_bytes());
    }
    return product;
  };
  for (int64_t d = 0; d < s->dirs; ++d) {
    RecurrentSpec::Packed& p = packed[static_cast<size_t>(d)];
    if (w != nullptr && one_product && s->seq > 0) {
      // X_t W^T: W [G*H, input] read transposed.
      const float* wd = w + d * GH * s->input;
      const int64_t tail = s->seq % s->chunk;
      p.x_chunk = keep(PackedProduct::Make(context, s->chunk * s->batch, GH, s->input, s->input,
                                           /*trans_b=*/true, wd, s->input));
      if (tail > 0) {
        p.x_tail = keep(PackedProduct::Make(context, tail * s->batch, GH, s->input, s->input,
                                            /*trans_b=*/true, wd, s->input));
      }
    }
    // The state products: sgemm does poorly with 2 to 16 rows (bench machine, one thread, 8x256
    // by 256x768: 20.3 us against 18.1 packed; 2 rows: 13.8 against 9.6), and small R gain less
    // than the matmul's fixed cost. With one row (a matrix-vector product) sgemm read a plain R
    // faster than oneDNN's packed matmul (1x256 by 256x1024 with R in the cache: 9.0 us against
    // 10.9), but not than our row kernel where R comes from L3, as in a model: one row takes a
    // packed product only on the row kernel (lstm_tagger_h256, H 256 bidirectional, batch 1:
    // 5003 -> 4581 us on one thread, 2686 -> 2453 on two; medians of 7 alternated runs' fastest
    // inference, AVX-512 VM), for every R this packs (kStateRowKernelMinWeights; GRU's 256x768
    // R^T at batch 1 on sgemm against the row kernel, gru_classifier_h256, medians of 3
    // alternated runs, AVX-512 VM: 2391 -> 2136 us on one thread, 1571 -> 1324 on two).
    auto state_product = [&](int64_t n, const float* rows) {
      std::shared_ptr<const PackedProduct> product = PackedProduct::Make(
          context, s->batch, n, H, H, /*trans_b=*/true, rows, H, GH, kStateRowKernelMinWeights);
      if (s->batch == 1 && product != nullptr && !product->row_kernel()) product = nullptr;
      return keep(std::move(product));
    };
    if (r != nullptr && s->batch <= 256 && H * GH >= kStateRowKernelMinWeights) {
      // h R^T of the gates [g0, g1): R's rows g0*H.. read transposed, into hr's columns g0*H..
      const float* rd = r + d * GH * H;
      p.state = state_product(first_gates * H, rd);
      if (first_gates < s->gates) {
        p.candidate = state_product((s->gates - first_gates) * H, rd + first_gates * H * H);
      }
    }
  }
  if (!any) return absl::OkStatus();
  s->packed = std::move(packed);
  // In floats, a whole number of 64-byte lines.
  s->scratch_floats = static_cast<int64_t>((scratch + 63) / 64 * 16);
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
  s.threads = context.intra_op_threads;
  s.r_transpose = MakeStridedPlan({hidden, gh}, {{1, hidden}});
  if (const void* r = context.inputs[2].data; r != nullptr) {
    auto packed = std::make_shared<std::vector<float>>(
        static_cast<size_t>(runtime::NumElements(context.inputs[2].shape)));
    const int64_t gh_h = gh * hidden;
    for (int64_t d = 0; d < s.dirs; ++d) {
      CopyStrided(s.r_transpose, static_cast<const float*>(r) + d * gh_h,
                  packed->data() + d * gh_h);
    }
    s.r_packed = std::move(packed);
  }
  // Input products of up to 2^18 floats (1 MiB, about what a core's L2 cache holds) at a
  // time, at least one step.
  constexpr int64_t kChunkFloats = int64_t{1} << 18;
  int64_t step_floats = 0;
  if (!runtime::CheckedMul(s.batch, s.gates * hidden, &step_floats)) {
    return InvalidArgument(context, "the workspace size overflows");
  }
  step_floats = std::max<int64_t>(1, step_floats);
  s.chunk = std::clamp<int64_t>(kChunkFloats / step_floats, 1, std::max<int64_t>(s.seq, 1));
  RETURN_IF_ERROR(PreparePackedProducts(context, &s));
  // One workspace per direction (they may run at once).
  const std::optional<int64_t> floats = WorkspaceFloats(s);
  std::optional<int64_t> bytes;
  if (floats.has_value()) bytes = runtime::CheckedByteSize(*floats, s.dirs * sizeof(float));
  if (!bytes.has_value()) return InvalidArgument(context, "the workspace size overflows");
  const std::string op = NodeLabel(context);
  return MakeKernel(
      context, std::move(outputs),
      [s, op](const KernelArgs& args) { return RunRecurrent(s, args, op); },
      static_cast<size_t>(*bytes));
}

}  // namespace

absl::Status RegisterRecurrentKernels(runtime::KernelRegistry* registry) {
  RETURN_IF_ERROR(registry->Register("RNN", &PrepareRecurrent<Cell::kRnn>));
  RETURN_IF_ERROR(registry->Register("GRU", &PrepareRecurrent<Cell::kGru>));
  RETURN_IF_ERROR(registry->Register("LSTM", &PrepareRecurrent<Cell::kLstm>));
  return absl::OkStatus();
}

}  // namespace reprise::kernels::cpu
