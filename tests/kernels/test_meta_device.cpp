// Meta vs cpu: the same sequence of allocations and ops on both backends
// gives identical ledgers (live, peak and count of every account but
// workspace, which is backend-specific) and identical executed FLOPs, equal
// to the figure worked out by hand; the meta backend books no workspace of
// its own (its 16-bit GEMMs convert nothing), and refuses over a limit at
// the same allocation as cpu.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/cpu_device.h"
#include "kernels/meta/meta_device.h"
#include "kernels/registry/registry.h"

namespace gpuledger {
namespace {

using A = Account;

// A small training-step-shaped sequence, written only against Device (as the
// model code is): parameters and optimizer state, a forward with a 16-bit GEMM,
// flash attention and a norm, a backward, an optimizer step; buffers freed as
// they would be, so the peaks are not just the sum of everything.
void run_sequence(Device& d) {
  const DType t = DType::kBF16;
  const int64_t m = 8, n = 12, k = 16;  // a linear layer: (m, k)·(k, n)
  Buffer w = d.alloc(k * n * 2, A::kWeights, "w");
  Buffer master = d.alloc(k * n * 4, A::kMaster, "master");
  Buffer adam_m = d.alloc(k * n * 4, A::kOptim, "adam.m"), adam_v = d.alloc(k * n * 4, A::kOptim, "adam.v");
  Buffer grad = d.alloc(k * n * 2, A::kGrads, "grad");
  Buffer kv = d.alloc(4096, A::kKv, "kv");
  for (Buffer* b : {&w, &master, &adam_m, &adam_v, &grad}) d.fill_zero(b->data(), b->bytes());

  Buffer x = d.alloc(m * k * 2, A::kActivations, "x");
  d.fill_zero(x.data(), x.bytes());
  Buffer y = d.alloc(m * n * 2, A::kActivations, "y");
  GemmArgs g;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = x.data();
  g.lda = k;
  g.b = w.data();
  g.ldb = n;
  g.ab_type = t;
  g.c = y.data();
  g.ldc = n;
  g.c_type = t;
  d.gemm(g);  // 2·8·12·16 = 3072 FLOPs; cpu books the widened tokens in workspace

  // fp32 batched GEMM (no conversion on either backend): 2·4·5·6·3 = 720 FLOPs.
  {
    Buffer a = d.alloc(3 * 4 * 6 * 4, A::kWorkspace, "a32"), b = d.alloc(3 * 6 * 5 * 4, A::kWorkspace, "b32");
    Buffer c = d.alloc(3 * 4 * 5 * 4, A::kWorkspace, "c32");
    for (Buffer* buf : {&a, &b, &c}) d.fill_zero(buf->data(), buf->bytes());
    GemmArgs f;
    f.m = 4;
    f.n = 5;
    f.k = 6;
    f.batch = 3;
    f.a = a.data();
    f.lda = 6;
    f.stride_a = 24;
    f.b = b.data();
    f.ldb = 5;
    f.stride_b = 30;
    f.c = c.data();
    f.ldc = 5;
    f.stride_c = 20;
    d.gemm(f);
  }

  // Flash attention, B 1, Hq 2, Hkv 1, T 16, D 8: forward 2·(2·1·2·16²·8) = 16384,
  // backward 5·(2·1·2·16²·8) = 40960 FLOPs.
  AttnShape s;
  s.B = 1;
  s.Hq = 2;
  s.Hkv = 1;
  s.T = 16;
  s.D = 8;
  const int64_t q_bytes = s.B * s.Hq * s.T * s.D * 2, kv_bytes = s.B * s.Hkv * s.T * s.D * 2;
  Buffer q = d.alloc(q_bytes, A::kActivations, "q"), kk = d.alloc(kv_bytes, A::kActivations, "k");
  Buffer vv = d.alloc(kv_bytes, A::kActivations, "v"), o = d.alloc(q_bytes, A::kActivations, "o");
  Buffer lse = d.alloc(s.B * s.Hq * s.T * 4, A::kActivations, "lse");
  for (Buffer* b : {&q, &kk, &vv}) d.fill_zero(b->data(), b->bytes());
  d.flash_attention_forward(o.data(), lse.as<float>(), q.data(), kk.data(), vv.data(), t, s, 0.0f, RngKey{1, 2});

  // LayerNorm over y (m rows of n).
  Buffer ln_w = d.alloc(n * 2, A::kWeights, "ln.w"), ln_b = d.alloc(n * 2, A::kWeights, "ln.b");
  Buffer ln_out = d.alloc(m * n * 2, A::kActivations, "ln.out");
  Buffer mean = d.alloc(m * 4, A::kActivations, "ln.mean"), rstd = d.alloc(m * 4, A::kActivations, "ln.rstd");
  d.fill_zero(ln_w.data(), ln_w.bytes());
  d.fill_zero(ln_b.data(), ln_b.bytes());
  d.layernorm_forward(ln_out.data(), mean.as<float>(), rstd.as<float>(), y.data(), ln_w.data(), ln_b.data(), t, m, n,
                      1e-5f);

  // Backward.
  {
    Buffer dq = d.alloc(q_bytes, A::kWorkspace, "dq"), dk = d.alloc(kv_bytes, A::kWorkspace, "dk");
    Buffer dv = d.alloc(kv_bytes, A::kWorkspace, "dv"), dout = d.alloc(q_bytes, A::kWorkspace, "dout");
    d.fill_zero(dout.data(), dout.bytes());
    d.flash_attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), kk.data(), vv.data(), o.data(),
                               lse.as<float>(), t, s, 0.0f, RngKey{1, 2});
  }
  for (Buffer* b : {&q, &kk, &vv, &o, &lse, &ln_out}) b->reset();  // activations freed by backward
  {
    Buffer comm = d.alloc(k * n * 4, A::kComm, "dp.bucket");
    d.convert(comm.data(), DType::kFP32, grad.data(), t, k * n);
  }
  d.adamw(master.as<float>(), w.data(), t, grad.data(), t, adam_m.as<float>(), adam_v.as<float>(), k * n, 1e-3f, 0.9f,
          0.95f, 1e-8f, 0.1f, 1, 1.0f);
}

TEST(MetaDevice, SameLedgerAndFlopsAsCpu) {
  Ledger lc, lm;
  CpuDevice cpu(lc);
  MetaDevice meta(lm);
  run_sequence(cpu);
  run_sequence(meta);

  for (Account a : kAllAccounts) {
    SCOPED_TRACE(std::string(account_name(a)));
    EXPECT_EQ(lc.live(a), 0);
    EXPECT_EQ(lm.live(a), 0);
    if (a == A::kWorkspace) continue;  // backend-specific
    EXPECT_EQ(lm.peak(a), lc.peak(a));
    EXPECT_EQ(lm.count(a), lc.count(a));
  }
  // Figures from the sequence: weights 16·12·2 + 2·12·2 = 432; optim 2·16·12·4 = 1536;
  // activations x 256 + y 192 + q 512 + k 256 + v 256 + o 512 + lse 128 + ln.out 192 +
  // mean 32 + rstd 32 = 2368, all live together.
  EXPECT_EQ(lm.peak(A::kWeights), 432);
  EXPECT_EQ(lm.peak(A::kOptim), 1536);
  EXPECT_EQ(lm.peak(A::kActivations), 2368);
  EXPECT_EQ(lm.count(A::kActivations), 10);

  EXPECT_EQ(cpu.executed_flops(), meta.executed_flops());
  EXPECT_EQ(meta.executed_flops(), 3072 + 720 + 16384 + 40960);

  // Workspace: the sequence's own workspace buffers on both (the largest
  // moment: the three fp32 GEMM operands, 288 + 360 + 240 = 888 bytes, or the
  // backward's dq, dk, dv, dout, 512 + 256 + 256 + 512 = 1536); on cpu also
  // the 16-bit GEMM's widened tokens (m = 8 ≤ 32, the skinny route: 8·16·4 =
  // 512 bytes, 1 allocation, below the backward's 1536).
  EXPECT_EQ(lm.peak(A::kWorkspace), 1536);
  EXPECT_EQ(lm.count(A::kWorkspace), 7);
  EXPECT_EQ(lc.count(A::kWorkspace), 7 + 1);
  EXPECT_EQ(lc.peak(A::kWorkspace), 1536);
}

TEST(MetaDevice, SixteenBitGemmBooksNoWorkspace) {
  Ledger l;
  MetaDevice d(l);
  GemmArgs g;
  g.m = 4096;
  g.n = 4096;
  g.k = 4096;
  g.ab_type = DType::kBF16;
  g.c_type = DType::kBF16;
  g.lda = g.ldb = g.ldc = 4096;
  d.gemm(g);  // null pointers: nothing is touched
  EXPECT_EQ(l.count(A::kWorkspace), 0);
  EXPECT_EQ(l.peak_total(), 0);
  EXPECT_EQ(d.executed_flops(), int64_t{2} * 4096 * 4096 * 4096);
}

TEST(MetaDevice, RefusesOverTheLimitAtTheSameAllocationAsCpu) {
  for (const char* name : {"cpu", "meta"}) {
    SCOPED_TRACE(name);
    Ledger l(10000);
    auto d = make_device(name, l);
    Buffer a = d->alloc(6000, A::kWeights, "w");
    try {
      Buffer b = d->alloc(4001, A::kGrads, "g");
      FAIL() << "expected OutOfMemory";
    } catch (const OutOfMemory& e) {
      EXPECT_EQ(std::string(e.what()),
                "allocating 4001 bytes for g (grads) would exceed the memory limit 10000: live 6000");
    }
    EXPECT_EQ(l.live_total(), 6000);
  }
}

}  // namespace
}  // namespace gpuledger
