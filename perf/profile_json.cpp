// The profiles to and from JSON (see profile_json.h; schemas in docs/perf-model.md).
#include "perf/profile_json.h"

#include <stdexcept>

#include "core/input_file.h"
#include "perf/json_fields.h"

namespace gpuledger::perf {

using detail::JsonFields;
using nlohmann::json;

namespace {

// Profiles are small: a measured GEMM grid is tens of points.
constexpr int64_t kMaxProfileFileBytes = int64_t{4} << 20;

json sourced_json(const Sourced& s) { return {{"value", s.value}, {"source", s.source}}; }

json provenance_json(const Provenance& p) {
  json j = {{"kind", p.kind}};
  if (p.kind == kMeasured) {
    j["date"] = p.date;
    j["command"] = p.command;
  }
  return j;
}

Provenance read_provenance(JsonFields f) {
  Provenance p;
  p.kind = f.string("kind");
  if (p.kind == kMeasured) {
    p.date = f.string("date");
    p.command = f.string("command");
  } else if (p.kind != kPublished) {
    f.fail("kind", "expected \"" + std::string(kMeasured) + "\" or \"" + kPublished + "\"");
  }
  f.finish();
  return p;
}

json table_points_json(const ShapeTable& t) {
  json points = json::array();
  for (const auto& p : t.points()) points.push_back({p.a, p.b, p.c, p.per_s});
  return points;
}

// [[a, b, c, per_s], …] → a ShapeTable (its own checks: a full grid, positive values).
ShapeTable read_table_points(JsonFields& f, const std::string& key) {
  const json& arr = f.raw(key);
  if (!arr.is_array()) f.fail(key, "expected an array of [d1, d2, d3, flops_per_s]");
  std::vector<ShapePoint> points;
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& p = arr[i];
    const std::string at = key + "[" + std::to_string(i) + "]";
    if (!p.is_array() || p.size() != 4 || !p[0].is_number_integer() || !p[1].is_number_integer() ||
        !p[2].is_number_integer() || !p[3].is_number())
      f.fail(at, "expected [integer, integer, integer, number]");
    points.push_back({p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].get<int64_t>(), p[3].get<double>()});
  }
  try {
    return ShapeTable(std::move(points));
  } catch (const std::invalid_argument& e) {
    f.fail(key, e.what());
  }
}

// [[m, n, k, batch, trans_a, trans_b, c_dtype, accumulate, seconds], …] → the measured calls.
GemmPoints read_gemm_points(JsonFields f) {
  GemmPoints g;
  g.source = f.string("source");
  const json& arr = f.raw("points");
  const char* form = "expected [m, n, k, batch (integers), trans_a, trans_b (booleans), c_dtype, accumulate, seconds]";
  if (!arr.is_array()) f.fail("points", form);
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& p = arr[i];
    const std::string at = "points[" + std::to_string(i) + "]";
    bool ok = p.is_array() && p.size() == 9 && p[4].is_boolean() && p[5].is_boolean() && p[6].is_string() &&
              p[7].is_boolean() && p[8].is_number();
    for (size_t d = 0; ok && d < 4; ++d) ok = p[d].is_number_integer();
    if (!ok) f.fail(at, form);
    const auto c_dtype = dtype_from_name(p[6].get<std::string>());
    if (!c_dtype) f.fail(at, "unknown c_dtype (bf16, fp16 or fp32)");
    const GemmCall call{p[0].get<int64_t>(),
                        p[1].get<int64_t>(),
                        p[2].get<int64_t>(),
                        p[3].get<int64_t>(),
                        p[4].get<bool>(),
                        p[5].get<bool>(),
                        *c_dtype,
                        p[7].get<bool>()};
    g.seconds[call] = p[8].get<double>();
  }
  f.finish();
  return g;
}

json gemm_points_json(const GemmPoints& g) {
  json points = json::array();
  for (const auto& [c, seconds] : g.seconds)
    points.push_back({c.m, c.n, c.k, c.batch, c.trans_a, c.trans_b, dtype_name(c.c_dtype), c.accumulate, seconds});
  return {{"source", g.source}, {"points", points}};
}

// [[bytes, bytes_per_s], …] of one op.
OpBandwidth read_op_bandwidth(JsonFields f) {
  OpBandwidth b;
  b.source = f.string("source");
  const json& arr = f.raw("points");
  if (!arr.is_array()) f.fail("points", "expected an array of [bytes, bytes_per_s]");
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& p = arr[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number())
      f.fail("points[" + std::to_string(i) + "]", "expected [integer bytes, number bytes_per_s]");
    b.points.emplace_back(p[0].get<int64_t>(), p[1].get<double>());
  }
  f.finish();
  return b;
}

void read_optional_notes(JsonFields& f) {
  if (!f.has("notes")) return;
  const json& n = f.raw("notes");
  if (!n.is_string() && !n.is_array()) f.fail("notes", "expected a string or an array of strings");
}

DTypeFigures read_dtype(JsonFields f) {
  DTypeFigures d;
  d.peak_flops_per_s = f.sourced("peak_flops_per_s");
  d.gemm_efficiency = f.sourced("gemm_efficiency");
  if (f.has("gemm_table")) {
    JsonFields t = f.object("gemm_table");
    GemmTable g;
    g.trans_a = t.boolean("trans_a");
    g.trans_b = t.boolean("trans_b");
    g.source = t.string("source");
    g.table = read_table_points(t, "points");
    t.finish();
    d.gemm = std::move(g);
  }
  if (f.has("gemm_points")) d.gemm_points = read_gemm_points(f.object("gemm_points"));
  f.finish();
  return d;
}

AttentionFigures read_attention(JsonFields f) {
  AttentionFigures a;
  a.efficiency = f.sourced("efficiency");
  if (f.has("table")) {
    JsonFields t = f.object("table");
    a.table_source = t.string("source");
    a.table = read_table_points(t, "points");
    t.finish();
  }
  f.finish();
  return a;
}

void check_schema(JsonFields& f, const char* schema) {
  const std::string s = f.string("schema");
  if (s != schema) f.fail("schema", "expected \"" + std::string(schema) + "\", got \"" + s + "\"");
}

json object_or_empty(JsonFields& f, const std::string& key) {
  if (!f.has(key)) return json::object();
  const json& v = f.raw(key);
  if (!v.is_object()) f.fail(key, "expected an object");
  return v;
}

LinkFigures read_link(JsonFields f) {
  LinkFigures l;
  l.kind = f.string("kind");
  l.latency_seconds = f.sourced("latency_seconds");
  l.busbw_bytes_per_s = f.sourced("busbw_bytes_per_s");
  f.finish();
  return l;
}

json link_json(const LinkFigures& l) {
  return {{"kind", l.kind},
          {"latency_seconds", sourced_json(l.latency_seconds)},
          {"busbw_bytes_per_s", sourced_json(l.busbw_bytes_per_s)}};
}

std::vector<CollectiveSample> read_samples(JsonFields f) {
  f.string("source");
  const json& arr = f.raw("points");
  if (!arr.is_array()) f.fail("points", "expected an array");
  std::vector<CollectiveSample> v;
  for (size_t i = 0; i < arr.size(); ++i) {
    JsonFields s(arr[i], f.origin(), f.path_of("points[" + std::to_string(i) + "]"));
    CollectiveSample c;
    const std::string kind = s.string("kind");
    const auto k = parse_comm_kind(kind);
    if (!k) s.fail("kind", "unknown collective \"" + kind + "\"");
    c.kind = *k;
    c.group_size = s.integer("group_size");
    c.bytes = s.integer("bytes");
    c.seconds = s.number("seconds");
    s.finish();
    v.push_back(c);
  }
  f.finish();
  return v;
}

json parse_file(const std::string& path, const char* what) {
  const std::string text = read_input_file(path, kMaxProfileFileBytes, what);
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(path + ": not JSON: " + e.what());
  }
}

json dtype_json(const DTypeFigures& f) {
  json d = {{"peak_flops_per_s", sourced_json(f.peak_flops_per_s)},
            {"gemm_efficiency", sourced_json(f.gemm_efficiency)}};
  if (f.gemm)
    d["gemm_table"] = {{"trans_a", f.gemm->trans_a},
                       {"trans_b", f.gemm->trans_b},
                       {"source", f.gemm->source},
                       {"points", table_points_json(f.gemm->table)}};
  if (!f.gemm_points.seconds.empty()) d["gemm_points"] = gemm_points_json(f.gemm_points);
  return d;
}

}  // namespace

// ---- device ----

json device_profile_to_json(const DeviceProfile& p) {
  json j = {{"schema", kDeviceProfileSchema},
            {"name", p.name},
            {"fingerprint", p.fingerprint},
            {"provenance", provenance_json(p.provenance)}};
  json dtypes = json::object();
  for (const auto& [dtype, f] : p.dtypes) dtypes[std::string(dtype_name(dtype))] = dtype_json(f);
  j["dtypes"] = dtypes;
  if (p.fp8_gemm) j["fp8_gemm"] = dtype_json(*p.fp8_gemm);
  j["memory_bandwidth_bytes_per_s"] = sourced_json(p.memory_bandwidth_bytes_per_s);
  if (!p.op_class_bandwidth.empty()) {
    json c = json::object();
    for (const auto& [cls, s] : p.op_class_bandwidth) c[std::string(op_class_name(cls))] = sourced_json(s);
    j["op_class_bandwidth_bytes_per_s"] = c;
  }
  if (!p.op_bandwidth.empty()) {
    json o = json::object();
    for (const auto& [name, b] : p.op_bandwidth) {
      json points = json::array();
      for (const auto& [bytes, rate] : b.points) points.push_back({bytes, rate});
      o[name] = {{"source", b.source}, {"points", points}};
    }
    j["op_bandwidth_bytes_per_s"] = o;
  }
  if (!p.attention.empty()) {
    json a = json::object();
    for (const auto& [kind, f] : p.attention) {
      json k = {{"efficiency", sourced_json(f.efficiency)}};
      if (!f.table.empty()) k["table"] = {{"source", f.table_source}, {"points", table_points_json(f.table)}};
      a[std::string(attention_kind_name(kind))] = k;
    }
    j["attention"] = a;
  }
  j["launch_floor_seconds"] = sourced_json(p.launch_floor_seconds);
  j["host_copy_bytes_per_s"] = sourced_json(p.host_copy_bytes_per_s);
  return j;
}

DeviceProfile device_profile_from_json(const json& j, const std::string& origin) {
  JsonFields f(j, origin, "$");
  check_schema(f, kDeviceProfileSchema);
  DeviceProfile p;
  p.name = f.string("name");
  p.fingerprint = object_or_empty(f, "fingerprint");
  p.provenance = read_provenance(f.object("provenance"));
  JsonFields dtypes = f.object("dtypes");
  for (const auto& [name, value] : j.at("dtypes").items()) {
    const auto dtype = dtype_from_name(name);
    if (!dtype) dtypes.fail(name, "unknown dtype (bf16, fp16 or fp32)");
    p.dtypes[*dtype] = read_dtype(dtypes.object(name));
  }
  if (f.has("fp8_gemm")) p.fp8_gemm = read_dtype(f.object("fp8_gemm"));
  p.memory_bandwidth_bytes_per_s = f.sourced("memory_bandwidth_bytes_per_s");
  if (f.has("op_class_bandwidth_bytes_per_s")) {
    JsonFields c = f.object("op_class_bandwidth_bytes_per_s");
    for (const auto& [name, value] : c.node().items()) {
      const auto cls = parse_op_class(name);
      if (!cls) c.fail(name, "unknown op class (norm, activation, softmax, optimizer, copy)");
      p.op_class_bandwidth[*cls] = c.sourced(name);
    }
  }
  if (f.has("op_bandwidth_bytes_per_s")) {
    JsonFields o = f.object("op_bandwidth_bytes_per_s");
    for (const auto& [name, value] : o.node().items()) p.op_bandwidth[name] = read_op_bandwidth(o.object(name));
  }
  if (f.has("attention")) {
    JsonFields a = f.object("attention");
    for (const auto& [name, value] : a.node().items()) {
      const auto kind = parse_attention_kind(name);
      if (!kind) a.fail(name, "unknown attention kind (flash, materialized)");
      p.attention[*kind] = read_attention(a.object(name));
    }
  }
  p.launch_floor_seconds = f.sourced("launch_floor_seconds");
  p.host_copy_bytes_per_s = f.sourced("host_copy_bytes_per_s");
  read_optional_notes(f);
  f.finish();
  try {
    validate_device_profile(p);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(origin + ": " + e.what());
  }
  return p;
}

DeviceProfile load_device_profile(const std::string& path) {
  return device_profile_from_json(parse_file(path, "device profile"), path);
}

// ---- network ----

json network_profile_to_json(const NetworkProfile& p) {
  json j = {{"schema", kNetworkProfileSchema},
            {"name", p.name},
            {"fingerprint", p.fingerprint},
            {"provenance", provenance_json(p.provenance)},
            {"ranks_per_node", sourced_json(p.ranks_per_node)}};
  json links = json::object();
  if (p.intra_node) links["intra_node"] = link_json(*p.intra_node);
  if (p.inter_node) links["inter_node"] = link_json(*p.inter_node);
  j["links"] = links;
  if (!p.samples.empty()) {
    json points = json::array();
    for (const auto& s : p.samples)
      points.push_back(
          {{"kind", comm_kind_name(s.kind)}, {"group_size", s.group_size}, {"bytes", s.bytes}, {"seconds", s.seconds}});
    j["samples"] = {{"source", "measured by gpuledger calibrate: median over fixed repetitions, max over ranks"},
                    {"points", points}};
  }
  return j;
}

NetworkProfile network_profile_from_json(const json& j, const std::string& origin) {
  JsonFields f(j, origin, "$");
  check_schema(f, kNetworkProfileSchema);
  NetworkProfile p;
  p.name = f.string("name");
  p.fingerprint = object_or_empty(f, "fingerprint");
  p.provenance = read_provenance(f.object("provenance"));
  p.ranks_per_node = f.sourced("ranks_per_node");
  JsonFields links = f.object("links");
  if (links.has("intra_node")) p.intra_node = read_link(links.object("intra_node"));
  if (links.has("inter_node")) p.inter_node = read_link(links.object("inter_node"));
  links.finish();
  if (f.has("samples")) p.samples = read_samples(f.object("samples"));
  read_optional_notes(f);
  f.finish();
  try {
    validate_network_profile(p);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(origin + ": " + e.what());
  }
  return p;
}

NetworkProfile load_network_profile(const std::string& path) {
  return network_profile_from_json(parse_file(path, "network profile"), path);
}

}  // namespace gpuledger::perf
