// The step simulator's core (see timeline.h): every rank's program is run in
// turns, each rank as far as it can go; a rank stops at a collective whose
// other members have not reached it yet, or at a recv whose send has not been
// issued, and the next turn takes it on. A turn in which no rank moves is a
// deadlock.
#include "perf/sim/timeline.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <utility>

namespace gpuledger::perf {
namespace {

constexpr double kUsPerSecond = 1e6;

struct Handle {
  double end_seconds = 0;
  std::string stream;
};

struct RankState {
  size_t pc = 0;
  double compute_free = 0;                      // when the compute stream is next free
  std::map<std::string, double> stream_free;    // the comm streams'
  std::map<int64_t, Handle> handles;            // started collectives
  std::map<std::string, int64_t> collective_n;  // calls made per channel
  std::map<std::string, int64_t> recv_n;        // recvs made per channel
  SimRankTimes times;
};

struct Meeting {                            // the n-th call of a collective on a channel
  std::map<int64_t, double> ready_seconds;  // per member index
};

class Simulation {
 public:
  explicit Simulation(const std::vector<SimRank>& ranks) : ranks_(ranks), state_(ranks.size()) {
    std::set<std::string> sent;
    for (size_t i = 0; i < ranks.size(); ++i) {
      state_[i].times.rank = ranks[i].rank;
      for (const SimEvent& e : ranks[i].program) {
        if (e.seconds < 0) throw std::invalid_argument("simulate_step: negative duration of " + e.name);
        if (e.kind == SimEventKind::kCollective || e.kind == SimEventKind::kCollectiveStart)
          members_[e.channel].insert(i);
        if (e.kind == SimEventKind::kSend) sent.insert(e.channel);
      }
    }
    for (const auto& r : ranks)
      for (const SimEvent& e : r.program)
        if (e.kind == SimEventKind::kRecv && !sent.count(e.channel))
          throw std::invalid_argument("simulate_step: rank " + std::to_string(r.rank) + " receives on '" + e.channel +
                                      "', on which no simulated rank sends");
  }

  SimResult run() {
    for (;;) {
      bool all_done = true, moved = false;
      for (size_t i = 0; i < ranks_.size(); ++i) {
        while (state_[i].pc < ranks_[i].program.size() && advance(i)) moved = true;
        all_done = all_done && state_[i].pc == ranks_[i].program.size();
      }
      if (all_done) break;
      if (!moved) throw std::runtime_error("simulate_step: the ranks' programs wait on each other (deadlock)");
    }
    SimResult out;
    for (auto& s : state_) {
      double end = s.compute_free;
      for (const auto& [stream, free] : s.stream_free) end = std::max(end, free);
      s.times.step_seconds = end;
      s.times.tail_seconds = end - s.compute_free;
      out.step_seconds = std::max(out.step_seconds, end);
      out.ranks.push_back(std::move(s.times));
    }
    return out;
  }

 private:
  void slice(RankState& s, const SimEvent& e, const std::string& stream, double start, double seconds) {
    s.times.slices.push_back({stream, e.name, start * kUsPerSecond, seconds * kUsPerSecond, e.flops, e.bytes});
  }

  // Runs rank i's next event if it can; false when it must wait for another rank.
  bool advance(size_t i) {
    RankState& s = state_[i];
    const SimEvent& e = ranks_[i].program[s.pc];
    switch (e.kind) {
      case SimEventKind::kCompute:
        slice(s, e, "compute", s.compute_free, e.seconds);
        s.compute_free += e.seconds;
        s.times.compute_seconds += e.seconds;
        break;
      case SimEventKind::kCollective:
      case SimEventKind::kCollectiveStart:
        if (!collective(i, e)) return false;
        break;
      case SimEventKind::kCollectiveWait: {
        const auto h = s.handles.find(e.handle);
        if (h == s.handles.end())
          throw std::invalid_argument("simulate_step: rank " + std::to_string(ranks_[i].rank) +
                                      " waits for a collective it never started");
        if (h->second.end_seconds > s.compute_free) {
          s.times.exposed_comm_seconds[h->second.stream] += h->second.end_seconds - s.compute_free;
          s.compute_free = h->second.end_seconds;
        }
        s.handles.erase(h);
        break;
      }
      case SimEventKind::kSend: {
        double& free = s.stream_free[e.stream];
        const double start = std::max(s.compute_free, free);
        free = start + e.seconds;
        sends_[e.channel].push_back(free);
        slice(s, e, e.stream, start, e.seconds);
        break;
      }
      case SimEventKind::kRecv: {
        int64_t& n = s.recv_n[e.channel];
        const auto& sent = sends_[e.channel];
        if (static_cast<int64_t>(sent.size()) <= n) return false;
        const double arrived = sent[static_cast<size_t>(n)];
        if (arrived > s.compute_free) {
          slice(s, e, e.stream, s.compute_free, arrived - s.compute_free);
          s.times.wait_seconds += arrived - s.compute_free;
          s.compute_free = arrived;
        }
        ++n;
        break;
      }
    }
    ++s.pc;
    return true;
  }

  // A collective starts once every member has reached it; false until then.
  bool collective(size_t i, const SimEvent& e) {
    RankState& s = state_[i];
    const int64_t n = s.collective_n[e.channel];
    double& stream_free = s.stream_free[e.stream];
    const double ready = std::max(s.compute_free, stream_free);
    Meeting& m = meetings_[{e.channel, n}];
    m.ready_seconds[static_cast<int64_t>(i)] = ready;
    if (m.ready_seconds.size() < members_.at(e.channel).size()) return false;
    double start = 0;
    for (const auto& [member, t] : m.ready_seconds) start = std::max(start, t);
    const double end = start + e.seconds;
    stream_free = end;
    slice(s, e, e.stream, start, e.seconds);
    if (e.kind == SimEventKind::kCollective) {
      s.times.wait_seconds += start - s.compute_free;  // the slowest member, or the stream still busy
      s.times.exposed_comm_seconds[e.stream] += e.seconds;
      s.compute_free = end;
    } else {
      s.handles[e.handle] = {end, e.stream};
    }
    ++s.collective_n[e.channel];
    return true;
  }

  const std::vector<SimRank>& ranks_;
  std::vector<RankState> state_;
  std::map<std::string, std::set<size_t>> members_;  // channel -> the simulated ranks that call it
  std::map<std::pair<std::string, int64_t>, Meeting> meetings_;
  std::map<std::string, std::vector<double>> sends_;  // channel -> each send's arrival, in order
};

}  // namespace

SimResult simulate_step(const std::vector<SimRank>& ranks) { return Simulation(ranks).run(); }

}  // namespace gpuledger::perf
