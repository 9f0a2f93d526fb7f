// The largest value every dimension, count and input file may take. Each is
// far above any real model or run (Llama 3 405B: 126 layers, hidden 16,384,
// vocab 128,256, 131,072 tokens of context; the largest published training
// worlds are ~10^5 GPUs) and low enough that the budgets stay in reach of
// 64-bit arithmetic for most combinations; what still overflows is caught by
// core/checked_math.h. Beyond a limit: ConfigError (exit status 2) naming the
// field and the limit, at parse time, before anything is computed.
#pragma once
#include <cstdint>
#include <string_view>

namespace gpuledger::limits {

// Model file fields and --layers.
inline constexpr int64_t kMaxLayers = int64_t{1} << 16;   // 65,536
inline constexpr int64_t kMaxHidden = int64_t{1} << 20;   // 1,048,576
inline constexpr int64_t kMaxHeads = int64_t{1} << 16;    // heads, kv_heads
inline constexpr int64_t kMaxHeadDim = int64_t{1} << 16;  // head_dim
inline constexpr int64_t kMaxFfn = int64_t{1} << 22;      // 4,194,304
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;    // 16,777,216
inline constexpr int64_t kMaxExperts = int64_t{1} << 12;  // num_experts, shared_experts (DeepSeek-V3: 256)
inline constexpr int64_t kMaxTokens = int64_t{1} << 24;   // max_seq, sliding_window, --seq, --context, lengths
// Layout: each of dp, tp, pp, and their product.
inline constexpr int64_t kMaxWorld = int64_t{1} << 20;  // 1,048,576 ranks
// Batches: --mbs, --microbatches, --requests, --max-batch.
inline constexpr int64_t kMaxBatch = int64_t{1} << 20;
// --gbs: mbs·dp·microbatches at most.
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 40;
// Ranks one report lists (--ranks all): each is budgeted and printed.
inline constexpr int64_t kMaxListedRanks = 4096;
// Points of one sweep grid (the product of its axes' sizes).
inline constexpr int64_t kMaxGridPoints = 10000;
// Requests of one trace file.
inline constexpr int64_t kMaxTraceRequests = int64_t{1} << 20;
// Prompt tokens infer makes at once (4 bytes each: 256 MiB).
inline constexpr int64_t kMaxPromptTokens = int64_t{1} << 26;
// Input files, read whole into memory (reports: report::kMaxReportFileBytes,
// bench/report/report_reader.h).
inline constexpr int64_t kMaxModelFileBytes = int64_t{1} << 20;   // 1 MiB
inline constexpr int64_t kMaxTraceFileBytes = int64_t{64} << 20;  // 64 MiB

// Throws ConfigError(field) "FIELD LABEL VALUE is above the limit LIMIT" when
// value > limit, and "must be >= MIN" when value < min.
void check_range(std::string_view field, int64_t value, int64_t min, int64_t max);

}  // namespace gpuledger::limits
