#include "graph/import.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "graph/import_detail.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace fs = std::filesystem;
namespace {

// Ids above this are rejected so that max_id + 1 and later size arithmetic cannot overflow.
constexpr int64_t kMaxNodeId = (int64_t{1} << 48) - 1;

inline bool is_sep(char c) { return c == ' ' || c == '\t' || c == '\r' || c == ','; }

// The token starting at p, for error messages (at most 40 characters, up to a separator).
std::string_view token_at(const char* p, const char* end) {
  const char* q = p;
  while (q < end && !is_sep(*q) && *q != '\n' && q - p < 40) ++q;
  return std::string_view(p, static_cast<size_t>(q - p));
}

// Destination of parsed edges for parse_edges. EdgeListData is one; the file importer uses a
// compact one that stores 32-bit ids while they fit.
struct DataSink {
  EdgeListData& d;
  size_t size() const { return d.src.size(); }
  bool weighted() const { return !d.weight.empty(); }
  void add(int64_t s, int64_t t) {
    d.src.push_back(s);
    d.dst.push_back(t);
    d.max_id = std::max(d.max_id, std::max(s, t));
  }
  void add(int64_t s, int64_t t, float w) {
    add(s, t);
    d.weight.push_back(w);
  }
  void add_time(int64_t t) { d.time.push_back(t); }
};

struct CompactSink {
  std::vector<int32_t> src32, dst32;
  std::vector<int64_t> src64, dst64;
  std::vector<float> weight;
  std::vector<int64_t> time;
  bool wide = false;
  bool weighted_ = false;
  bool keep_weights = true;
  int64_t max_id = -1;
  size_t n = 0;

  size_t size() const { return n; }
  bool weighted() const { return weighted_; }
  void reserve(size_t m) {
    if (wide) {
      src64.reserve(m);
      dst64.reserve(m);
    } else {
      src32.reserve(m);
      dst32.reserve(m);
    }
  }
  void widen() {
    src64.assign(src32.begin(), src32.end());
    dst64.assign(dst32.begin(), dst32.end());
    std::vector<int32_t>().swap(src32);
    std::vector<int32_t>().swap(dst32);
    wide = true;
  }
  void add(int64_t s, int64_t t) {
    if (!wide && (s > INT32_MAX || t > INT32_MAX)) widen();
    if (wide) {
      src64.push_back(s);
      dst64.push_back(t);
    } else {
      src32.push_back(static_cast<int32_t>(s));
      dst32.push_back(static_cast<int32_t>(t));
    }
    max_id = std::max(max_id, std::max(s, t));
    ++n;
  }
  void add(int64_t s, int64_t t, float w) {
    if (n == 0) weighted_ = true;
    add(s, t);
    if (keep_weights) weight.push_back(w);
  }
  void add_time(int64_t t) { time.push_back(t); }
};

// Checks a node id of line `line`: not negative, at most kMaxNodeId, and below limit when
// limit >= 0.
void check_node_id(int64_t id, const std::string& what, int64_t line, int64_t limit) {
  DSP_CHECK_FORMAT(id >= 0, "{}:{}: negative node id {}", what, line, id);
  DSP_CHECK_FORMAT(id <= kMaxNodeId, "{}:{}: node id {} is too large", what, line, id);
  if (limit >= 0 && id >= limit) {
    DSP_THROW_T(FormatError, "{}:{}: node id {} >= number of nodes {}", what, line, id, limit);
  }
}

// How the columns of an edge line are read: ids below `limit` (when >= 0); the time in column
// `time_col` (0-based; -1: no time column), the weight in the other column after the ids.
struct EdgeColumns {
  int64_t limit = -1;
  int time_col = -1;
  int max_columns() const { return time_col >= 0 ? 4 : 3; }
  const char* layout() const {
    return time_col < 0    ? "src dst [weight]"
           : time_col == 2 ? "src dst time [weight]"
                           : "src dst weight time";
  }
};

// One parsed edge line: its ids, weight and time as the columns give them.
struct EdgeLine {
  int64_t ids[2] = {0, 0};
  float w = 0;
  int64_t time = 0;
  int columns = 0;  // 0: a blank or comment line
};

// Parses column `col` (the token at [q, le)) of an edge line into e; returns the token's end.
const char* parse_edge_token(const char* q, const char* le, int col, EdgeLine& e,
                             const EdgeColumns& c, const std::string& what, int64_t line) {
  const char* tok = q;
  const bool is_id = col < 2, is_time = col == c.time_col;
  std::from_chars_result r = is_id     ? std::from_chars(q, le, e.ids[col])
                             : is_time ? std::from_chars(q, le, e.time)
                                       : std::from_chars(q, le, e.w);
  if (r.ec != std::errc() || (r.ptr < le && !is_sep(*r.ptr) && *r.ptr != '#')) {
    if (is_time) {
      DSP_THROW_T(FormatError, "{}:{}: bad edge time '{}' in column {}: times are integers", what,
                  line, token_at(tok, le), col + 1);
    }
    DSP_THROW_T(FormatError, "{}:{}: bad {} '{}'", what, line, is_id ? "node id" : "edge weight",
                token_at(tok, le));
  }
  if (is_id) check_node_id(e.ids[col], what, line, c.limit);
  if (!is_id && !is_time && !(e.w >= 0 && std::isfinite(e.w))) {  // NaN fails both
    DSP_THROW_T(FormatError, "{}:{}: edge weight '{}' is {}; edge weights must be finite and >= 0",
                what, line, token_at(tok, le),
                std::isnan(e.w)   ? "NaN"
                : std::isinf(e.w) ? "infinite"
                                  : "negative");
  }
  return r.ptr;
}

// Parses the columns of the edge line [p, le) (up to a '#' comment) into e.
void parse_edge_columns(const char* p, const char* le, EdgeLine& e, const EdgeColumns& c,
                        const std::string& what, int64_t line) {
  const char* q = p;
  while (true) {
    while (q < le && is_sep(*q)) ++q;
    if (q >= le || *q == '#') break;
    if (e.columns == c.max_columns()) {
      DSP_THROW_T(FormatError, "{}:{}: too many columns (expected '{}')", what, line, c.layout());
    }
    q = parse_edge_token(q, le, e.columns, e, c, what, line);
    ++e.columns;
  }
}

// Adds the edge of line `line` to sink, weighted when it has a weight column and timed when
// there is a time column; every line must agree with the sink's first on whether there is a
// weight column, and have the time column.
template <class Sink>
void add_edge(Sink& sink, const EdgeLine& e, const EdgeColumns& c, const std::string& what,
              int64_t line) {
  if (c.time_col >= 0 && e.columns <= c.time_col) {
    DSP_THROW_T(FormatError, "{}:{}: no time in column {} (expected '{}')", what, line,
                c.time_col + 1, c.layout());
  }
  const bool has_w = e.columns > (c.time_col >= 0 ? 3 : 2);
  if (sink.size() > 0 && has_w != sink.weighted()) {
    DSP_THROW_T(FormatError, "{}:{}: {} a weight column but earlier lines {}", what, line,
                has_w ? "has" : "lacks", has_w ? "do not" : "do");
  }
  if (has_w) {
    sink.add(e.ids[0], e.ids[1], e.w);
  } else {
    sink.add(e.ids[0], e.ids[1]);
  }
  if (c.time_col >= 0) sink.add_time(e.time);
}

// Parses edge lines into `sink` as `c` says. Returns the number of the line after the text.
template <class Sink>
int64_t parse_edges(std::string_view text, Sink& sink, const std::string& what, int64_t line,
                    const EdgeColumns& c) {
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* le = nl ? nl : end;
    EdgeLine e;
    parse_edge_columns(p, le, e, c, what, line);
    if (e.columns == 1) {
      DSP_THROW_T(FormatError, "{}:{}: expected '{}', got one column", what, line, c.layout());
    }
    if (e.columns >= 2) add_edge(sink, e, c, what, line);
    ++line;
    p = nl ? nl + 1 : end;
  }
  return line;
}

// The columns an edge list is read with under `opts`.
EdgeColumns edge_columns(const EdgeListOptions& opts, int64_t limit) {
  return {limit, opts.time_column > 0 ? static_cast<int>(opts.time_column) - 1 : -1};
}

bool is_gzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char m[2] = {0, 0};
  in.read(reinterpret_cast<char*>(m), 2);
  return in.gcount() == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

// An estimate of the uncompressed size of a file, to reserve edge arrays once instead of growing
// them (growth briefly holds old and new buffers, which dominates peak memory).
uint64_t estimate_text_bytes(const std::string& path) {
  uint64_t size = file_size(path);
  if (!is_gzip(path) || size < 18) return size;
  // The gzip trailer holds the uncompressed size modulo 2^32; text rarely compresses below 1:1.
  std::ifstream in(path, std::ios::binary);
  in.seekg(-4, std::ios::end);
  unsigned char t[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(t), 4);
  uint64_t est =
      uint64_t{t[0]} | (uint64_t{t[1]} << 8) | (uint64_t{t[2]} << 16) | (uint64_t{t[3]} << 24);
  while (est < size) est += uint64_t{1} << 32;
  return est;
}

std::string require_file(const std::string& path) {
  check_file_readable(path);
  return path;
}

// raw/<stem>.csv.gz, or raw/<stem>.csv; "" when neither exists.
std::string find_csv(const fs::path& dir, const std::string& stem) {
  std::error_code ec;
  for (const char* ext : {".csv.gz", ".csv"}) {
    fs::path p = dir / (stem + ext);
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

template <class T>
std::vector<T> read_csv_file(const std::string& path, int64_t cols, size_t reserve = 0) {
  std::vector<T> out;
  out.reserve(reserve);
  for_each_text_chunk(path, [&](std::string_view text, int64_t line) {
    parse_csv_numbers<T>(text, cols, out, path, line);
  });
  return out;
}

int64_t read_single_count(const std::string& path) {
  auto v = read_csv_file<int64_t>(require_file(path), 1);
  DSP_CHECK_FORMAT(v.size() == 1, "{}: expected one count (a single-graph dataset), found {} lines",
                   path, v.size());
  DSP_CHECK_FORMAT(v[0] >= 0, "{}: negative count {}", path, v[0]);
  return v[0];
}

// The CSR of the sink's edges, with their times when `timed` (a time column was read).
Csr build_from_sink(CompactSink& sink, int64_t n, const CsrBuildOptions& o, const std::string& what,
                    bool timed = false) {
  try {
    const float* w = sink.weighted_ && sink.keep_weights ? sink.weight.data() : nullptr;
    const int64_t* t = timed ? sink.time.data() : nullptr;
    auto m = static_cast<int64_t>(sink.n);
    Csr g = sink.wide ? build_in_csr<int64_t>(n, sink.src64.data(), sink.dst64.data(), m, w, o, t)
                      : build_in_csr<int32_t>(n, sink.src32.data(), sink.dst32.data(), m, w, o, t);
    if (timed && !g.has_times()) g.times = Array(DType::kInt64, {0});  // no edges
    return g;
  } catch (const std::bad_alloc&) {
    DSP_THROW_T(Error, "{}: out of memory building the CSR of {} nodes and {} edges", what, n,
                sink.n);
  }
}

// The split of an OGB raw directory into ds's train/valid/test ids; returns the split's name
// ("" when there is none and !opts.require_split). Every id must be a node id and appear once in
// its file; errors name the CSV file and line.
std::string read_ogb_split(const fs::path& raw, const OgbImportOptions& opts, int64_t n,
                           Dataset& ds) {
  std::error_code ec;
  std::string split_name = opts.split;
  const fs::path split_root = raw / "split";
  if (split_name.empty()) {
    std::vector<std::string> names;
    if (fs::is_directory(split_root, ec)) {
      for (const auto& e : fs::directory_iterator(split_root, ec)) {
        if (e.is_directory()) names.push_back(e.path().filename().string());
      }
    }
    std::sort(names.begin(), names.end());
    if (names.empty()) {
      DSP_CHECK_T(IoError, !opts.require_split,
                  "{}: no split folder (OGB node datasets come with "
                  "split/<name>/{{train,valid,test}}.csv.gz); pass --no-split to import the graph "
                  "without training, validation and test ids",
                  split_root.string());
      return "";
    }
    split_name = names.front();
    if (names.size() > 1) {
      DSP_WARN("import", "{}: several splits ({}), using '{}' (choose one with --split)",
               split_root.string(), names.size(), split_name);
    }
  }
  const fs::path sdir = split_root / split_name;
  DSP_CHECK_T(IoError, fs::is_directory(sdir, ec), "{}: no such split directory", sdir.string());
  const std::pair<const char*, Array*> parts[] = {
      {"train", &ds.train_idx}, {"valid", &ds.valid_idx}, {"test", &ds.test_idx}};
  std::vector<bool> seen;
  for (auto [stem, arr] : parts) {
    std::string f = find_csv(sdir, stem);
    DSP_CHECK_T(IoError, !f.empty(), "{}: missing file (a split has train, valid and test ids)",
                (sdir / (std::string(stem) + ".csv.gz")).string());
    auto ids = read_csv_file<int64_t>(f, 1);
    seen.assign(static_cast<size_t>(n), false);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= n) {
        DSP_THROW_T(FormatError, "{}:{}: split id out of range: {} is not in [0, {})", f, i + 1,
                    ids[i], n);
      }
      if (seen[static_cast<size_t>(ids[i])]) {
        const auto first = std::find(ids.begin(), ids.end(), ids[i]) - ids.begin();
        DSP_THROW_T(FormatError, "{}:{}: node {} appears more than once (first on line {})", f,
                    i + 1, ids[i], first + 1);
      }
      seen[static_cast<size_t>(ids[i])] = true;
    }
    *arr = Array::from_vector(std::move(ids));
  }
  return split_name;
}

}  // namespace

void parse_edge_list_text(std::string_view text, EdgeListData& out, const std::string& what,
                          int64_t first_line) {
  DataSink sink{out};
  parse_edges(text, sink, what, first_line, EdgeColumns{});
}

namespace {

// The field [*b, *e) without leading and trailing spaces and tabs.
void trim_field(const char*& b, const char*& e) {
  while (b < e && (*b == ' ' || *b == '\t')) ++b;
  while (e > b && (e[-1] == ' ' || e[-1] == '\t')) --e;
}

// The number in the trimmed field [b, e), column col (0-based) of line `line`; an empty field is
// NaN for floating-point T and an error for integers.
template <class T>
T parse_csv_field(const char* b, const char* e, int64_t col, int64_t expected_cols,
                  const std::string& what, int64_t line) {
  T v{};
  if (b == e) {
    if constexpr (std::is_floating_point_v<T>) {
      v = std::numeric_limits<T>::quiet_NaN();
    } else {
      DSP_THROW_T(FormatError, "{}:{}: empty field in column {} (expected {} integers)", what, line,
                  col + 1, expected_cols);
    }
  } else {
    auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e) {
      DSP_THROW_T(FormatError, "{}:{}: bad number '{}' in column {}", what, line,
                  std::string_view(b, static_cast<size_t>(std::min<ptrdiff_t>(e - b, 40))),
                  col + 1);
    }
  }
  return v;
}

// Appends the comma-separated numbers of the line [p, le) to out, at most expected_cols of them;
// returns their number.
template <class T>
int64_t parse_csv_line(const char* p, const char* le, int64_t expected_cols, std::vector<T>& out,
                       const std::string& what, int64_t line) {
  int64_t col = 0;
  const char* q = p;
  while (true) {
    const char* fe = static_cast<const char*>(std::memchr(q, ',', static_cast<size_t>(le - q)));
    if (!fe) fe = le;
    const char* b = q;
    const char* e = fe;
    trim_field(b, e);
    if (col == expected_cols) {
      DSP_THROW_T(FormatError, "{}:{}: too many columns (expected {})", what, line, expected_cols);
    }
    out.push_back(parse_csv_field<T>(b, e, col, expected_cols, what, line));
    ++col;
    if (fe == le) break;
    q = fe + 1;
  }
  return col;
}

}  // namespace

template <class T>
void parse_csv_numbers(std::string_view text, int64_t expected_cols, std::vector<T>& out,
                       const std::string& what, int64_t first_line) {
  DSP_CHECK_ARG(expected_cols > 0, "{}: expected column count must be positive", what);
  const char* p = text.data();
  const char* const end = p + text.size();
  int64_t line = first_line;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* le = nl ? nl : end;
    if (le > p && le[-1] == '\r') --le;
    const int64_t col = parse_csv_line(p, le, expected_cols, out, what, line);
    if (col != expected_cols) {
      DSP_THROW_T(FormatError, "{}:{}: expected {} columns, got {}", what, line, expected_cols,
                  col);
    }
    ++line;
    p = nl ? nl + 1 : end;
  }
}
template void parse_csv_numbers<int64_t>(std::string_view, int64_t, std::vector<int64_t>&,
                                         const std::string&, int64_t);
template void parse_csv_numbers<float>(std::string_view, int64_t, std::vector<float>&,
                                       const std::string&, int64_t);

int64_t for_each_text_chunk(const std::string& path,
                            const std::function<void(std::string_view, int64_t)>& fn,
                            size_t chunk_bytes) {
  require_file(path);
  chunk_bytes = std::max<size_t>(chunk_bytes, 1);
  gzFile gz = gzopen(path.c_str(), "rb");
  DSP_CHECK_T(IoError, gz != nullptr, "{}: cannot open: {}", path, std::strerror(errno));
  struct Closer {
    gzFile f;
    ~Closer() { gzclose(f); }
  } closer{gz};
  gzbuffer(gz, 1 << 20);
  std::vector<char> buf(chunk_bytes);
  size_t carry = 0;
  int64_t line = 1;
  while (true) {
    // A line longer than the buffer: grow it so the line fits.
    if (carry == buf.size()) buf.resize(buf.size() * 2);
    size_t want = std::min<size_t>(buf.size() - carry, INT_MAX);
    int got = gzread(gz, buf.data() + carry, static_cast<unsigned>(want));
    if (got < 0) {
      int err = 0;
      const char* msg = gzerror(gz, &err);
      DSP_THROW_T(IoError, "{}: read failed: {}", path, msg ? msg : "unknown error");
    }
    if (got == 0) {
      int err = Z_OK;
      const char* msg = gzerror(gz, &err);
      DSP_CHECK_T(IoError, err == Z_OK || err == Z_STREAM_END,
                  "{}: corrupt or truncated gzip stream: {}", path, msg ? msg : "");
      if (carry > 0) {
        fn(std::string_view(buf.data(), carry), line);
        ++line;
      }
      break;
    }
    size_t len = carry + static_cast<size_t>(got);
    const void* last = ::memrchr(buf.data() + carry, '\n', static_cast<size_t>(got));
    if (!last) {
      carry = len;
      continue;
    }
    size_t upto = static_cast<size_t>(static_cast<const char*>(last) - buf.data()) + 1;
    fn(std::string_view(buf.data(), upto), line);
    line += std::count(buf.data(), buf.data() + upto, '\n');
    std::memmove(buf.data(), buf.data() + upto, len - upto);
    carry = len - upto;
  }
  return line - 1;
}

void check_time_column(int64_t time_column) {
  DSP_CHECK_ARG(time_column == 0 || time_column == 3 || time_column == 4,
                "--time-column must be 3 ('src dst time [weight]') or 4 ('src dst weight time'), "
                "got {}",
                time_column);
}

Array read_node_times(const std::string& path, int64_t num_nodes) {
  require_file(path);
  std::vector<int64_t> t;
  if (fs::path(path).extension() == ".npy") {
    Array a = load_npy(path, /*mmap=*/false);
    DSP_CHECK_FORMAT((a.dtype() == DType::kInt64 || a.dtype() == DType::kInt32) && a.ndim() == 1,
                     "{}: node times must be int64 or int32 [{}], got {}", path, num_nodes,
                     a.describe());
    t.resize(static_cast<size_t>(a.dim(0)));
    for (int64_t i = 0; i < a.dim(0); ++i) t[i] = a.int_at(i);
  } else {
    t.reserve(static_cast<size_t>(num_nodes));
    for_each_text_chunk(path, [&](std::string_view text, int64_t line) {
      parse_csv_numbers<int64_t>(text, 1, t, path, line);
    });
  }
  DSP_CHECK_FORMAT(static_cast<int64_t>(t.size()) == num_nodes,
                   "{}: has {} node times but the graph has {} nodes", path, t.size(), num_nodes);
  return Array::from_vector(std::move(t));
}

Array read_node_features(const std::string& path, int64_t num_nodes) {
  require_file(path);
  DSP_CHECK_FORMAT(fs::path(path).extension() == ".npy",
                   "{}: node features must be a .npy file (float32 or float16 [num_nodes, F])",
                   path);
  Array a = load_npy(path, /*mmap=*/false);
  DSP_CHECK_FORMAT((a.dtype() == DType::kFloat32 || a.dtype() == DType::kFloat16) &&
                       a.ndim() == 2 && a.dim(1) > 0,
                   "{}: node features must be float32 or float16 [num_nodes, F > 0], got {}", path,
                   a.describe());
  DSP_CHECK_FORMAT(num_nodes < 0 || a.dim(0) == num_nodes,
                   "{}: has {} feature rows but the graph has {} nodes", path, a.dim(0), num_nodes);
  return a;
}

Dataset import_edge_list(const std::string& path, const EdgeListOptions& opts,
                         const std::string& name, ImportStats* stats) {
  DSP_CHECK_ARG(opts.num_nodes >= -1, "--num-nodes must be non-negative, got {}", opts.num_nodes);
  check_time_column(opts.time_column);
  require_file(path);
  Stopwatch sw;
  CompactSink sink;
  sink.keep_weights = opts.weighted_auto;
  const uint64_t est_bytes = estimate_text_bytes(path);
  bool reserved = false;
  for_each_text_chunk(path, [&](std::string_view text, int64_t line) {
    if (!reserved && text.size() > 0) {
      // Estimate the line count from the first chunk's average line length.
      auto lines = std::count(text.begin(), text.end(), '\n') + 1;
      double per_line = static_cast<double>(text.size()) / static_cast<double>(lines);
      sink.reserve(static_cast<size_t>(static_cast<double>(est_bytes) / per_line * 1.02) + 1024);
      reserved = true;
    }
    parse_edges(text, sink, path, line, edge_columns(opts, opts.num_nodes));
  });
  const double parse_s = sw.seconds();

  const int64_t n = opts.num_nodes >= 0 ? opts.num_nodes : sink.max_id + 1;
  DSP_CHECK_FORMAT(n > 0, "{}: empty graph: no edges{}", path,
                   opts.num_nodes < 0 ? " (and no --num-nodes)" : "");
  sw.reset();
  CsrBuildOptions o;
  o.symmetrize = opts.undirected;
  o.remove_self_loops = opts.remove_self_loops;
  Dataset ds;
  ds.graph = build_from_sink(sink, n, o, path, opts.time_column > 0);
  const int64_t input_edges = static_cast<int64_t>(sink.n);
  sink = CompactSink();
  ds.meta.name = name.empty() ? fs::path(path).stem().string() : name;
  ds.meta.directed = !opts.undirected;
  ds.meta.extra = {{"importer", "edgelist"},
                   {"source", fs::absolute(path).string()},
                   {"input_edges", input_edges}};
  ds.sync_meta();
  if (stats) {
    stats->parse_s = parse_s;
    stats->build_s = sw.seconds();
    stats->input_edges = input_edges;
  }
  return ds;
}

namespace detail {

OgbRaw open_ogb_raw(const std::string& dir) {
  std::error_code ec;
  DSP_CHECK_T(IoError, fs::is_directory(dir, ec), "{}: no such directory", dir);
  OgbRaw in;
  in.root = fs::path(dir);
  if (in.root.filename().empty()) in.root = in.root.parent_path();  // a trailing slash
  in.raw = fs::is_directory(in.root / "raw", ec) ? in.root / "raw" : in.root;
  in.edge_file = find_csv(in.raw, "edge");
  DSP_CHECK_T(IoError, !in.edge_file.empty(), "{}: missing file (not an OGB raw directory)",
              (in.raw / "edge.csv.gz").string());
  auto count_file = [&](const char* stem) {
    std::string f = find_csv(in.raw, stem);
    return f.empty() ? (in.raw / (std::string(stem) + ".csv.gz")).string() : f;
  };
  in.nodes_file = count_file("num-node-list");
  in.edges_file = count_file("num-edge-list");
  in.num_nodes = read_single_count(in.nodes_file);
  in.num_edges = read_single_count(in.edges_file);
  DSP_CHECK_FORMAT(in.num_nodes > 0, "{}: empty graph: 0 nodes", in.nodes_file);
  return in;
}

std::string find_ogb_csv(const OgbRaw& in, const std::string& stem) {
  return find_csv(in.raw, stem);
}

void check_ogb_edges(const OgbRaw& in, bool weighted, int64_t edges) {
  DSP_CHECK_FORMAT(!weighted, "{}: expected two columns 'src,dst', got three", in.edge_file);
  DSP_CHECK_FORMAT(edges == in.num_edges, "{}: has {} edges but {} says {}", in.edge_file, edges,
                   in.edges_file, in.num_edges);
}

int64_t stream_ogb_features(const std::string& file, int64_t num_nodes,
                            const std::function<void(const std::vector<float>&, int64_t)>& fn) {
  int64_t dim = -1, rows = 0;
  std::vector<float> values;
  for_each_text_chunk(file, [&](std::string_view text, int64_t line) {
    if (dim < 0) {
      // The width is the first line's field count; every later line must match it.
      std::string_view first = text.substr(0, text.find('\n'));
      dim = static_cast<int64_t>(std::count(first.begin(), first.end(), ',')) + 1;
    }
    values.clear();
    parse_csv_numbers<float>(text, dim, values, file, line);
    const int64_t count = static_cast<int64_t>(values.size());
    for (int64_t k = 0; k < count; ++k) {  // named here, not later on features.npy
      DSP_CHECK_FORMAT(std::isfinite(values[k]),
                       "{}: feature {} (column {}) of node {} is {}; features must be finite", file,
                       k % dim, k % dim + 1, rows + k / dim,
                       std::isnan(values[k]) ? "NaN (or an empty field)" : "infinite");
    }
    rows += static_cast<int64_t>(values.size()) / dim;
    fn(values, dim);
  });
  DSP_CHECK_FORMAT(rows == num_nodes, "{}: has {} rows but the graph has {} nodes", file, rows,
                   num_nodes);
  return dim;
}

// The field count of the first line of a (gzipped) CSV file; 1 for an empty file.
int64_t first_line_columns(const std::string& file) {
  gzFile gz = gzopen(file.c_str(), "rb");  // reads plain files too
  DSP_CHECK_T(IoError, gz != nullptr, "{}: cannot open: {}", file, std::strerror(errno));
  int64_t commas = 0;
  char buf[4096];
  for (int got; (got = gzread(gz, buf, sizeof(buf))) > 0;) {
    const char* end = static_cast<const char*>(std::memchr(buf, '\n', static_cast<size_t>(got)));
    commas += std::count(static_cast<const char*>(buf), end ? end : buf + got, ',');
    if (end) break;
  }
  gzclose(gz);
  return commas + 1;
}

// OGB's multi-label node-label (ogbn-proteins: L columns of 0/1 per node) as int8 [n, L]; a row
// of empty fields (NaN) is unlabeled (-1 throughout). Faults name the file and line.
Array read_ogb_label_rows(const std::string& f, int64_t n, int64_t L) {
  std::vector<int8_t> rows;
  rows.reserve(static_cast<size_t>(n * L));
  int64_t line = 1;
  std::vector<float> values;
  for_each_text_chunk(f, [&](std::string_view text, int64_t first) {
    values.clear();
    parse_csv_numbers<float>(text, L, values, f, first);  // wrong column counts named there
    line = first;
    for (size_t r = 0; r < values.size(); r += static_cast<size_t>(L), ++line) {
      const float* v = values.data() + r;
      const bool unlabeled = std::all_of(v, v + L, [](float x) { return std::isnan(x); });
      for (int64_t j = 0; j < L; ++j) {
        DSP_CHECK_FORMAT(unlabeled || v[j] == 0.0f || v[j] == 1.0f,
                         "{}:{}: label {} (column {}) is {}; multi-label values must be 0 or 1 "
                         "(or every field of the line empty: unlabeled)",
                         f, line, j, j + 1, v[j]);
        rows.push_back(unlabeled ? int8_t{-1} : static_cast<int8_t>(v[j]));
      }
    }
  });
  const int64_t got = static_cast<int64_t>(rows.size()) / L;
  DSP_CHECK_FORMAT(got == n, "{}: has {} rows but the graph has {} nodes", f, got, n);
  return Array::from_vector(std::move(rows), {n, L});
}

std::string read_ogb_labels_and_split(const OgbRaw& in, const OgbImportOptions& opts, Dataset& ds) {
  const int64_t n = in.num_nodes;
  std::string f = find_csv(in.raw, "node-label");
  const int64_t columns = f.empty() ? 0 : first_line_columns(f);
  if (columns > 1) {
    ds.labels = read_ogb_label_rows(f, n, columns);
  } else if (columns == 1) {
    auto raw_labels = read_csv_file<float>(f, 1, static_cast<size_t>(n));
    DSP_CHECK_FORMAT(static_cast<int64_t>(raw_labels.size()) == n,
                     "{}: has {} rows but the graph has {} nodes", f, raw_labels.size(), n);
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float v = raw_labels[i];
      if (std::isnan(v)) {
        labels[i] = -1;  // OGB marks unlabeled nodes with NaN
        continue;
      }
      DSP_CHECK_FORMAT(v >= 0 && v < 16777216.0f && v == std::floor(v),
                       "{}:{}: label {} is not a non-negative integer", f, i + 1, v);
      labels[i] = static_cast<int64_t>(v);
    }
    ds.labels = Array::from_vector(std::move(labels));
  }
  return read_ogb_split(in.raw, opts, n, ds);
}

DatasetMeta ogb_meta(const OgbRaw& in, const OgbImportOptions& opts, const std::string& split) {
  DatasetMeta m;
  std::string base = in.root.filename().string();
  if (base == "raw") base = in.root.parent_path().filename().string();
  m.name = opts.name.empty() ? base : opts.name;
  m.directed = !opts.undirected;
  m.extra = {{"importer", "ogb-raw"},
             {"source", fs::absolute(in.root).string()},
             {"split", split},
             {"input_edges", in.num_edges}};
  return m;
}

}  // namespace detail

Dataset import_ogb_raw(const std::string& dir, const OgbImportOptions& opts, ImportStats* stats) {
  Stopwatch sw;
  const detail::OgbRaw in = detail::open_ogb_raw(dir);
  const int64_t n = in.num_nodes;
  CompactSink sink;
  sink.reserve(static_cast<size_t>(in.num_edges));
  for_each_text_chunk(in.edge_file, [&](std::string_view text, int64_t line) {
    parse_edges(text, sink, in.edge_file, line, EdgeColumns{n, -1});
  });
  detail::check_ogb_edges(in, sink.weighted(), static_cast<int64_t>(sink.n));

  Dataset ds;
  if (std::string f = detail::find_ogb_csv(in, "node-feat"); !f.empty()) {
    std::vector<float> feat;
    const int64_t dim =
        detail::stream_ogb_features(f, n, [&](const std::vector<float>& rows, int64_t d) {
          if (feat.empty()) feat.reserve(static_cast<size_t>(n) * static_cast<size_t>(d));
          feat.insert(feat.end(), rows.begin(), rows.end());
        });
    ds.features = Array::from_vector(std::move(feat), {n, dim});
  }
  const std::string split_name = detail::read_ogb_labels_and_split(in, opts, ds);
  const double parse_s = sw.seconds();

  sw.reset();
  CsrBuildOptions o;
  o.symmetrize = opts.undirected;
  ds.graph = build_from_sink(sink, n, o, in.edge_file);
  sink = CompactSink();
  ds.meta = detail::ogb_meta(in, opts, split_name);
  ds.sync_meta();
  if (stats) {
    stats->parse_s = parse_s;
    stats->build_s = sw.seconds();
    stats->input_edges = in.num_edges;
  }
  return ds;
}

// ---------------------------------------------------------------- memory planning, streaming

namespace {

// Thrown to stop reading a file once a sample is complete.
struct StopSampling {};

// Edges of one chunk, with the weighted-ness of every edge line so far (the column-count check
// of parse_edges spans chunks).
struct StreamSink {
  EdgeListData d;
  size_t total = 0;
  bool weighted_ = false;
  size_t size() const { return total; }
  bool weighted() const { return weighted_; }
  void add(int64_t s, int64_t t) {
    d.src.push_back(s);
    d.dst.push_back(t);
    d.max_id = std::max(d.max_id, std::max(s, t));
    ++total;
  }
  void add(int64_t s, int64_t t, float w) {
    if (total == 0) weighted_ = true;
    add(s, t);
    d.weight.push_back(w);
  }
  void add_time(int64_t t) { d.time.push_back(t); }
};

}  // namespace

EdgeListSample sample_edge_list(const std::string& path, int64_t time_column) {
  require_file(path);
  const int time_col = time_column > 0 ? static_cast<int>(time_column) - 1 : -1;
  EdgeListSample s;
  const uint64_t est_bytes = estimate_text_bytes(path);
  uint64_t bytes = 0;
  int64_t lines = 0;
  StreamSink sink;
  try {
    for_each_text_chunk(
        path,
        [&](std::string_view text, int64_t line) {
          parse_edges(text, sink, path, line, EdgeColumns{-1, time_col});
          bytes += text.size();
          lines += std::count(text.begin(), text.end(), '\n');
          if (sink.total > 0 && bytes >= (size_t{1} << 20)) throw StopSampling{};
        },
        size_t{1} << 20);
  } catch (const StopSampling&) {
  }
  s.weighted = sink.weighted_;
  s.max_id = sink.d.max_id;
  const double per_line =
      static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(lines, 1));
  s.edges = static_cast<int64_t>(static_cast<double>(est_bytes) / std::max(per_line, 1.0)) + 1;
  return s;
}

uint64_t estimate_edge_list_memory(const EdgeListSample& s, const EdgeListOptions& opts) {
  const uint64_t m = static_cast<uint64_t>(s.edges);
  const uint64_t n = static_cast<uint64_t>(opts.num_nodes >= 0 ? opts.num_nodes : s.max_id + 1);
  const uint64_t in_id = s.max_id > INT32_MAX ? 8 : 4, out_id = n < (uint64_t{1} << 31) ? 4 : 8;
  // Times ride with the weights: 8 bytes per parsed edge and per stored entry.
  const uint64_t w = (s.weighted && opts.weighted_auto ? 4 : 0) + (opts.time_column > 0 ? 8 : 0);
  const uint64_t entries = opts.undirected ? 2 * m : m;
  // The parsed edges (reserved once, 2% over the estimate) beside the CSR being built and its
  // row cursor; the (neighbour, weight) pairs of weighted rows are per thread, one row each.
  return m * (2 * in_id + w) * 102 / 100 + 8 * n + entries * (out_id + w) + 8 * n +
         (uint64_t{64} << 20);
}

namespace {

// The node and edge counts of an OGB directory; false when a count file is missing (the importer
// then names it).
bool read_ogb_counts(const std::string& dir, fs::path& raw, uint64_t& n, uint64_t& m) {
  std::error_code ec;
  fs::path root = fs::path(dir);
  if (root.filename().empty()) root = root.parent_path();
  raw = fs::is_directory(root / "raw", ec) ? root / "raw" : root;
  std::string nodes_file = find_csv(raw, "num-node-list"),
              edges_file = find_csv(raw, "num-edge-list");
  if (nodes_file.empty() || edges_file.empty()) return false;
  n = static_cast<uint64_t>(read_single_count(nodes_file));
  m = static_cast<uint64_t>(read_single_count(edges_file));
  return true;
}

}  // namespace

uint64_t estimate_ogb_memory(const std::string& dir) {
  fs::path raw;
  uint64_t n = 0, m = 0;
  if (!read_ogb_counts(dir, raw, n, m)) return 0;
  uint64_t dim = 0;
  if (std::string f = find_csv(raw, "node-feat"); !f.empty()) {
    try {
      for_each_text_chunk(
          f,
          [&](std::string_view text, int64_t) {
            std::string_view first = text.substr(0, text.find('\n'));
            dim = static_cast<uint64_t>(std::count(first.begin(), first.end(), ',')) + 1;
            throw StopSampling{};
          },
          size_t{1} << 16);
    } catch (const StopSampling&) {
    }
  }
  // Edges (int32 pairs), the symmetric CSR, features (float32, held twice while the dataset is
  // assembled: the parsed vector moves, so once), labels parsed as float then int64.
  return 8 * m + 16 * n + 2 * m * 4 + 8 * n + n * dim * 4 + 12 * n + (uint64_t{64} << 20);
}

uint64_t ogb_out_of_core_bytes(const std::string& dir) {
  fs::path raw;
  uint64_t n = 0, m = 0;
  if (!read_ogb_counts(dir, raw, n, m)) return edge_list_out_of_core_bytes();
  // The edge list path's buffers, then the per-node data held while the graph is on disk: labels
  // parsed as float then int64 (12 bytes a node), the labels beside the split's ids (up to 16).
  return edge_list_out_of_core_bytes() + 24 * n;
}

void stream_edge_list(const std::string& path, const EdgeListOptions& opts,
                      const std::function<void(const EdgeListData&)>& fn) {
  DSP_CHECK_ARG(opts.num_nodes >= -1, "--num-nodes must be non-negative, got {}", opts.num_nodes);
  require_file(path);
  StreamSink sink;
  for_each_text_chunk(path, [&](std::string_view text, int64_t line) {
    parse_edges(text, sink, path, line, edge_columns(opts, opts.num_nodes));
    fn(sink.d);
    sink.d.src.clear();
    sink.d.dst.clear();
    sink.d.weight.clear();
    sink.d.time.clear();
  });
}

}  // namespace dsp
