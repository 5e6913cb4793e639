// Plain results tables rendered as Markdown, CSV and JSON (see text_table.h).
#include "eval/text_table.h"

#include <fmt/format.h>

#include <cmath>

#include "eval/tables.h"
#include "util/atomic_file.h"
#include "util/json_text.h"

namespace rpe::eval {
namespace fs = std::filesystem;

std::string fixed(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }  // 1e308: all 309 digits

namespace {

template <typename Range, typename Fn>
std::string joined(const Range& items, const std::string& sep, Fn&& text) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + text(items[i]);
  return out;
}
}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string markdown_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return out;
}

Cell Cell::integer(int64_t v) { return shown(std::to_string(v), v); }
Cell Cell::number(double v, int decimals) {
  // A non-finite value has no JSON number: null, and the text printf gives ("nan", "inf").
  return shown(fixed(v, decimals), std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
}
Cell Cell::dash() { return shown("—", nullptr); }
Cell Cell::shown(std::string text, nlohmann::json value) {
  Cell c("");
  c.text = std::move(text);
  c.value = std::move(value);
  return c;
}

Cell stat_cell(const std::vector<double>& values, bool with_n) {
  if (values.empty()) return Cell::dash();
  const Stat s = mean_std(values);
  // One seed has no sample std: its value alone, as render_tables shows it.
  std::string text = s.n == 1 ? fixed(s.mean, 2) : fixed(s.mean, 2) + " ± " + fixed(s.std, 2);
  if (with_n) text += " (n=" + std::to_string(s.n) + ")";
  return Cell::shown(text, {{"mean", s.mean}, {"std", s.n > 1 ? nlohmann::json(s.std) : nlohmann::json()}, {"n", s.n}});
}

std::string with_thousands(double v) {
  const std::string digits = fixed(v, 0);  // exact ties round half to even (as printf), as Python's format does
  const size_t start = !digits.empty() && digits[0] == '-' ? 1 : 0, n = digits.size() - start;
  std::string out = digits.substr(0, start);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[start + i];
  }
  return out;
}

std::string to_markdown(const TextTable& t) {
  std::string md = "### " + t.title + "\n\n| " + joined(t.columns, " | ", [](const auto& s) { return s; }) + " |\n|";
  for (size_t i = 0; i < t.columns.size(); ++i) md += "---|";
  md += "\n";
  for (const auto& row : t.rows)
    md += "| " + joined(row, " | ", [](const Cell& c) { return markdown_cell(c.text); }) + " |\n";
  if (!t.notes.empty()) md += "\n";
  for (const auto& note : t.notes) md += "- " + note + "\n";
  return md;
}

std::string to_csv(const TextTable& t) {
  std::string csv = joined(t.columns, ",", csv_field) + "\n";
  for (const auto& row : t.rows) csv += joined(row, ",", [](const Cell& c) { return csv_field(c.text); }) + "\n";
  return csv;
}

nlohmann::ordered_json to_json(const TextTable& t) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : t.rows) {
    nlohmann::ordered_json r = nlohmann::ordered_json::object();
    for (size_t i = 0; i < row.size() && i < t.columns.size(); ++i) r[t.columns[i]] = row[i].value;
    rows.push_back(std::move(r));
  }
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["table"] = t.name;
  j["title"] = t.title;
  j["columns"] = t.columns;
  j["rows"] = std::move(rows);
  if (!t.notes.empty()) j["notes"] = t.notes;
  return j;
}

void write_table(const fs::path& dir, const TextTable& t) {
  // All three or none (a full disk leaves the old ones); run names come from folder names, not
  // always UTF-8: dump_json shows such a byte as U+FFFD.
  fs::create_directories(dir);
  write_files_atomic({{dir / (t.name + ".md"), to_markdown(t)},
                      {dir / (t.name + ".csv"), to_csv(t)},
                      {dir / (t.name + ".json"), dump_json(to_json(t), 2) + "\n"}});
}

}  // namespace rpe::eval
