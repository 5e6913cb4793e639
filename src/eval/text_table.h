// A plain results table (a title, column names, rows of cells) and its three renderings:
// Markdown ("### title" + a pipe table), CSV (RFC 4180 quoting: a cell with a comma, quote or
// newline is quoted) and JSON (the same rows with typed values). Used by the reproduction's
// extra tables (cost, scaled Table 4, Table 5, length extrapolation; see extra_tables.h);
// the paper's Tables 2-4 keep their own long-format layout (tables.h).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rpe::eval {

// One cell: the text shown in Markdown/CSV and the typed value written to JSON (a number, a
// string, {"mean", "std", "n"} for a statistic over seeds, or null for "—").
struct Cell {
  std::string text;
  nlohmann::json value;

  Cell(const char* s) : text(s), value(s) {}            // NOLINT: implicit, cells are mostly text
  Cell(const std::string& s) : text(s), value(s) {}     // NOLINT
  static Cell integer(int64_t v);                       // "1234"
  static Cell number(double v, int decimals);           // "%.<decimals>f", JSON the exact value
  static Cell dash();                                   // "—", JSON null
  static Cell shown(std::string text, nlohmann::json value);
};

struct TextTable {
  std::string name;   // file stem: <name>.md, <name>.csv, <name>.json
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;  // each row has columns.size() cells
  std::vector<std::string> notes;       // below the table (Markdown) and in the JSON: what was left out
};

// "82.00 ± 2.00" (mean ± sample std; 0 for one value) with " (n=3)" when with_n; "—" (JSON
// null) for no values. JSON: {"mean": .., "std": .., "n": ..}.
Cell stat_cell(const std::vector<double>& values, bool with_n);
// Thousands separated with commas, rounded to an integer ("12,346"), as Python's "{:,.0f}".
std::string with_thousands(double v);

std::string to_markdown(const TextTable& t);
std::string to_csv(const TextTable& t);
// RFC 4180: a cell holding a separator, a quote or a line break is quoted, inner quotes doubled.
std::string csv_field(const std::string& s);
// `v` with `decimals` digits after the point, whole however large ("%.*f").
std::string fixed(double v, int decimals);
// `s` as one Markdown table cell: '|' escaped, line breaks as spaces (a run or method name
// holding them would otherwise split the row or the table).
std::string markdown_cell(const std::string& s);
// {"table", "title", "columns", "rows": [{column: value, ...}]}, keys in column order.
nlohmann::ordered_json to_json(const TextTable& t);

// Writes <dir>/<name>.md, .csv and .json, each atomically (dir created if missing).
void write_table(const std::filesystem::path& dir, const TextTable& t);

}  // namespace rpe::eval
