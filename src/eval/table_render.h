// One of Tables 2-4 as its definition (columns, the paper's numbers, which rows and in what
// order) and its long-format rendering into Markdown, CSV and JSON (tables.h); the definitions
// are tables.cpp's.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/table_cells.h"
#include "eval/tables.h"

namespace rpe::eval::tables_detail {

using PaperFn = std::function<std::optional<double>(const GroupKey&, size_t column)>;

struct Table {
  std::string name, caption;
  std::vector<Column> columns;
  PaperFn paper;  // published value for (row, column) or nullopt
  std::function<bool(const GroupKey&)> keep = [](const GroupKey&) { return true; };
  // Row order within the paper's order of methods; nullptr: by k, lengths, run.
  std::function<bool(const GroupKey&, const GroupKey&)> before = nullptr;
  // The paper's "BERT (Devlin et al.)" row for a column, published numbers only (Tables 2, 3).
  std::function<std::optional<double>(size_t column)> reference = nullptr;
  std::string reference_label = "BERT (Devlin et al., published)";
};

// Appends table `t` over the cells `v` to `out`: its Markdown section, CSV lines and JSON rows.
void render(const Table& t, const Values& v, RenderedTables& out);

}  // namespace rpe::eval::tables_detail
