// `dsp convert --from ogb-hetero`: OGB's raw layout of heterogeneous node-property datasets
// (ogbn-mag) into a heterogeneous dataset directory (graph/hetero.hpp).
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "graph/hetero_detail.hpp"
#include "graph/import.hpp"
#include "graph/import_detail.hpp"

namespace dsp {
namespace fs = std::filesystem;
namespace {

// dir/<stem>.csv.gz, or dir/<stem>.csv; "" when neither exists.
std::string find_csv_in(const fs::path& dir, const std::string& stem) {
  detail::OgbRaw at;
  at.raw = dir;
  return detail::find_ogb_csv(at, stem);
}

std::string require_csv(const fs::path& dir, const std::string& stem, const char* why) {
  std::string f = find_csv_in(dir, stem);
  DSP_CHECK_T(IoError, !f.empty(), "{}: missing file ({})", (dir / (stem + ".csv.gz")).string(),
              why);
  return f;
}

// The lines of a small text file (gzip or plain), without their line ends; trailing empty lines
// dropped.
std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  for_each_text_chunk(path, [&](std::string_view text, int64_t) {
    size_t p = 0;
    while (p < text.size()) {
      size_t nl = text.find('\n', p);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view l = text.substr(p, nl - p);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      lines.emplace_back(l);
      p = nl + 1;
    }
  });
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

// The comma-separated fields of a line, spaces around them trimmed.
std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> out;
  size_t p = 0;
  while (true) {
    const size_t c = std::min(line.find(',', p), line.size());
    std::string f = line.substr(p, c - p);
    f.erase(0, f.find_first_not_of(" \t"));
    f.erase(f.find_last_not_of(" \t") + 1);
    out.push_back(std::move(f));
    if (c == line.size()) return out;
    p = c + 1;
  }
}

// A raw heterogeneous directory: the dataset root, the folder of the CSV files, num-node-dict.
struct HeteroRaw {
  fs::path root, raw;
  std::string nodes_file;
  std::vector<NodeTypeInfo> types;  // by name
  int type(const std::string& name) const {
    for (size_t t = 0; t < types.size(); ++t) {
      if (types[t].name == name) return static_cast<int>(t);
    }
    return -1;
  }
};

// Node types from num-node-dict: a header row of names and a row of counts; sorted by name.
void read_node_types(HeteroRaw& in) {
  const std::string& f = in.nodes_file;
  const std::vector<std::string> lines = read_lines(f);
  DSP_CHECK_FORMAT(lines.size() == 2,
                   "{}: expected a header row of node type names and one row of their counts, got "
                   "{} lines",
                   f, lines.size());
  const std::vector<std::string> names = split_fields(lines[0]);
  std::vector<int64_t> counts;
  parse_csv_numbers<int64_t>(lines[1], static_cast<int64_t>(names.size()), counts, f, 2);
  std::set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    DSP_CHECK_FORMAT(detail::valid_hetero_name(names[i]),
                     "{}:1: node type name '{}' must be non-empty, without '___' or '/'", f,
                     names[i]);
    DSP_CHECK_FORMAT(seen.insert(names[i]).second, "{}:1: node type '{}' is listed twice", f,
                     names[i]);
    DSP_CHECK_FORMAT(counts[i] >= 0, "{}:2: negative count {} for {}", f, counts[i], names[i]);
    in.types.push_back({names[i], counts[i]});
  }
  std::sort(in.types.begin(), in.types.end(),
            [](const NodeTypeInfo& a, const NodeTypeInfo& b) { return a.name < b.name; });
}

HeteroRaw open_hetero_raw(const std::string& dir) {
  std::error_code ec;
  DSP_CHECK_T(IoError, fs::is_directory(dir, ec), "{}: no such directory", dir);
  HeteroRaw in;
  in.root = fs::path(dir);
  if (in.root.filename().empty()) in.root = in.root.parent_path();  // a trailing slash
  in.raw = fs::is_directory(in.root / "raw", ec) ? in.root / "raw" : in.root;
  // Given raw/ itself: the dataset root (its name, split/) is its parent.
  if (in.raw == in.root && in.root.filename() == "raw") in.root = in.root.parent_path();
  in.nodes_file = require_csv(in.raw, "num-node-dict", "not an OGB heterogeneous raw directory");
  read_node_types(in);
  return in;
}

// <src>___<name>___<dst> split into its parts; false when it has no such form.
bool parse_key(const std::string& key, RelationInfo& r) {
  const size_t a = key.find("___"), b = key.rfind("___");
  if (a == std::string::npos || a == b) return false;
  r = RelationInfo{key.substr(0, a), key.substr(a + 3, b - a - 3), key.substr(b + 3)};
  return true;
}

// The relations: triplet-type-list's lines when it exists, else the folders under
// raw/relations; in key order, each type a type of num-node-dict.
std::vector<RelationInfo> list_relations(const HeteroRaw& in) {
  const fs::path rel_root = in.raw / "relations";
  std::error_code ec;
  std::vector<RelationInfo> rels;
  if (std::string f = find_csv_in(in.raw, "triplet-type-list"); !f.empty()) {
    const std::vector<std::string> lines = read_lines(f);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::vector<std::string> t = split_fields(lines[i]);
      DSP_CHECK_FORMAT(t.size() == 3, "{}:{}: expected 3 columns 'src,relation,dst', got {}", f,
                       i + 1, t.size());
      rels.push_back(RelationInfo{t[0], t[1], t[2]});
      const fs::path d = rel_root / rels.back().key();
      DSP_CHECK_FORMAT(fs::is_directory(d, ec), "{}: missing relation directory ({}:{} lists it)",
                       d.string(), f, i + 1);
    }
  } else {
    DSP_CHECK_T(IoError, fs::is_directory(rel_root, ec),
                "{}: no such directory (OGB heterogeneous datasets keep each relation's edges in "
                "relations/<src>___<relation>___<dst>/edge.csv.gz)",
                rel_root.string());
    for (const auto& e : fs::directory_iterator(rel_root, ec)) {
      if (!e.is_directory()) continue;
      RelationInfo r;
      DSP_CHECK_FORMAT(parse_key(e.path().filename().string(), r),
                       "{}: a relation directory is named <src>___<relation>___<dst>",
                       e.path().string());
      rels.push_back(std::move(r));
    }
  }
  std::sort(rels.begin(), rels.end(),
            [](const RelationInfo& a, const RelationInfo& b) { return a.key() < b.key(); });
  for (const RelationInfo& r : rels) {
    for (const std::string& t : {r.src, r.dst}) {
      DSP_CHECK_FORMAT(in.type(t) >= 0,
                       "{}: relation {} names node type '{}', which {} does not list",
                       (rel_root / r.key()).string(), r.key(), t, in.nodes_file);
    }
  }
  return rels;
}

// One relation's edges ("src,dst" per line, type-local ids) as its CSR; ids checked with their
// line, the count against num-edge-list when it is there.
Csr read_relation(const HeteroRaw& in, const RelationInfo& r, int64_t& edges) {
  const fs::path d = in.raw / "relations" / r.key();
  const std::string f = require_csv(d, "edge", "a relation's edges, 'src,dst' per line");
  const NodeTypeInfo& src = in.types[in.type(r.src)];
  const NodeTypeInfo& dst = in.types[in.type(r.dst)];
  std::vector<int64_t> pairs;
  for_each_text_chunk(f, [&](std::string_view text, int64_t line) {
    const size_t before = pairs.size();
    parse_csv_numbers<int64_t>(text, 2, pairs, f, line);
    for (size_t k = before; k < pairs.size(); k += 2) {
      const int64_t at = line + static_cast<int64_t>((k - before) / 2);
      for (const auto& [v, t, end] :
           {std::tuple{pairs[k], &src, "source"}, std::tuple{pairs[k + 1], &dst, "destination"}}) {
        DSP_CHECK_FORMAT(v >= 0 && v < t->count, "{}:{}: {} id {} is outside {}'s {} ids", f, at,
                         end, v, t->name, t->count);
      }
    }
  });
  edges = static_cast<int64_t>(pairs.size() / 2);
  if (std::string nf = find_csv_in(d, "num-edge-list"); !nf.empty()) {
    std::vector<int64_t> listed;
    for_each_text_chunk(nf, [&](std::string_view text, int64_t line) {
      parse_csv_numbers<int64_t>(text, 1, listed, nf, line);
    });
    DSP_CHECK_FORMAT(listed.size() == 1 && listed[0] == edges, "{}: has {} edges but {} says {}", f,
                     edges, nf, listed.empty() ? -1 : listed[0]);
  }
  std::vector<int64_t> s(static_cast<size_t>(edges)), t(static_cast<size_t>(edges));
  for (int64_t i = 0; i < edges; ++i) s[i] = pairs[2 * i], t[i] = pairs[2 * i + 1];
  pairs = {};
  return detail::build_relation_csr(src.count, dst.count, s.data(), t.data(), edges, f);
}

// The features of each type that has raw/node-feat/<type>/node-feat.csv(.gz).
void read_features(const HeteroRaw& in, HeteroDataset& ds) {
  ds.features.assign(in.types.size(), Array());
  for (size_t t = 0; t < in.types.size(); ++t) {
    const std::string f = find_csv_in(in.raw / "node-feat" / in.types[t].name, "node-feat");
    if (f.empty()) continue;
    const int64_t n = in.types[t].count;
    std::vector<float> feat;
    const int64_t dim =
        detail::stream_ogb_features(f, n, [&](const std::vector<float>& rows, int64_t) {
          feat.insert(feat.end(), rows.begin(), rows.end());
        });
    ds.features[t] = Array::from_vector(std::move(feat), {n, n > 0 ? dim : 0});
  }
}

// The target type: the one type with raw/node-label/<type>/node-label.csv(.gz) (-1: none).
int find_target(const HeteroRaw& in) {
  const fs::path root = in.raw / "node-label";
  std::error_code ec;
  std::vector<int> found;
  if (fs::is_directory(root, ec)) {
    for (const auto& e : fs::directory_iterator(root, ec)) {
      if (!e.is_directory()) continue;
      const std::string name = e.path().filename().string();
      DSP_CHECK_FORMAT(in.type(name) >= 0, "{}: node type '{}' is not listed in {}",
                       e.path().string(), name, in.nodes_file);
      if (!find_csv_in(e.path(), "node-label").empty()) found.push_back(in.type(name));
    }
  }
  std::sort(found.begin(), found.end());
  DSP_CHECK_FORMAT(found.size() <= 1,
                   "{}: labels for {} node types ({} and {}); a dataset has one target type",
                   root.string(), found.size(), in.types[found[0]].name, in.types[found[1]].name);
  return found.empty() ? -1 : found[0];
}

// The target type's labels (NaN: -1) and its split's train, valid and test ids, read by the
// homogeneous importer's reader (a folder holding node-label.csv.gz; one holding split/<name>/
// with the three files); returns the split scheme ("" when none and !opts.require_split).
std::string read_labels_and_split(const HeteroRaw& in, const OgbHeteroImportOptions& opts,
                                  int target, HeteroDataset& ds) {
  const NodeTypeInfo& type = in.types[target];
  Dataset tmp;
  detail::OgbRaw at;
  at.raw = in.raw / "node-label" / type.name;
  at.num_nodes = type.count;
  OgbImportOptions lo;
  lo.require_split = false;  // no split/ beside node-label.csv.gz
  detail::read_ogb_labels_and_split(at, lo, tmp);
  ds.labels = tmp.labels;
  std::error_code ec;
  at.raw = fs::is_directory(in.root / "split", ec) ? in.root : in.raw;
  const fs::path split_root = at.raw / "split";
  std::string scheme = opts.split;
  if (scheme.empty()) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(split_root, ec)) {
      if (e.is_directory()) names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    if (names.empty()) {
      DSP_CHECK_T(IoError, !opts.require_split,
                  "{}: no split folder (OGB datasets come with split/<scheme>/{}/{{train,valid,"
                  "test}}.csv.gz); pass --no-split to import the graph without training, "
                  "validation and test ids",
                  split_root.string(), type.name);
      return "";
    }
    scheme = names.front();
    if (names.size() > 1) {
      DSP_WARN("import", "{}: several splits ({}), using '{}' (choose one with --split)",
               split_root.string(), names.size(), scheme);
    }
  }
  lo.split = scheme + "/" + type.name;
  lo.require_split = true;
  tmp = Dataset();
  detail::read_ogb_labels_and_split(at, lo, tmp);  // no node-label.csv.gz beside split/
  ds.train_idx = tmp.train_idx;
  ds.valid_idx = tmp.valid_idx;
  ds.test_idx = tmp.test_idx;
  return scheme;
}

}  // namespace

HeteroDataset import_ogb_hetero(const std::string& dir, const OgbHeteroImportOptions& opts,
                                ImportStats* stats) {
  Stopwatch sw;
  const HeteroRaw in = open_hetero_raw(dir);
  HeteroDataset ds;
  ds.schema.node_types = in.types;
  ds.schema.relations = list_relations(in);
  nlohmann::json input_edges = nlohmann::json::object();
  int64_t total_edges = 0;
  for (const RelationInfo& r : ds.schema.relations) {
    int64_t edges = 0;
    ds.relations.push_back(read_relation(in, r, edges));
    input_edges[r.key()] = edges;
    total_edges += edges;
  }
  read_features(in, ds);
  const int target = find_target(in);
  std::string scheme;
  if (target >= 0) {
    ds.schema.target_type = in.types[target].name;
    scheme = read_labels_and_split(in, opts, target, ds);
  } else {
    DSP_CHECK_T(IoError, !opts.require_split,
                "{}: no node-label/<type>/node-label.csv.gz: no target type to train on; pass "
                "--no-split to import the graph alone",
                in.raw.string());
  }
  ds.name = opts.name.empty() ? in.root.filename().string() : opts.name;
  ds.extra = {{"importer", "ogb-hetero"},
              {"source", fs::absolute(in.root).string()},
              {"split", scheme},
              {"add_reverse", opts.add_reverse},
              {"input_edges", input_edges}};
  const double parse_s = sw.seconds();
  sw.reset();
  if (opts.add_reverse) add_reverse_relations(ds);
  ds.sync_schema();
  if (stats) {
    stats->parse_s = parse_s;
    stats->build_s = sw.seconds();
    stats->input_edges = total_edges;
  }
  return ds;
}

}  // namespace dsp
