#include "support.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace conform {

namespace {

const char *k_begin = "<!-- tinyfin-conform support: begin -->";
const char *k_end = "<!-- tinyfin-conform support: end -->";

using Column = std::map<std::string, std::string>;  // op -> cell

// The dtypes of an op's cases that the backend claims: "f32" when it claims every case of that
// dtype, "f32*" when only some (layouts, shapes or params it leaves to the fallback).
Column column(const std::vector<Case> &cases, const Backend &cpu, const Backend &b) {
    std::map<std::string, std::map<int32_t, std::pair<int, int>>> counts;  // op -> dtype -> (claimed, cases)
    for (const Case &c : cases) {
        // A case of the op: inside its dtypes column (`test` checks that nobody claims the others)
        // and valid (the cpu reference takes it: max of an empty axis is not).
        if (!c.in_column() || !claims(cpu.target, c)) continue;
        auto &n = counts[c.op_name][c.dtype()];
        n.second++;
        if (claims(b.target, c)) n.first++;
    }
    Column col;
    for (const OpRow &row : op_rows()) {
        std::string cell;
        std::vector<int32_t> dtypes = all_dtypes();
        dtypes.insert(dtypes.end(), quant_dtypes().begin(), quant_dtypes().end());
        for (int32_t dt : dtypes) {
            auto it = counts[row.name].find(dt);
            if (it == counts[row.name].end() || it->second.first == 0) continue;
            if (!cell.empty()) cell += ' ';
            cell += dtype_name(dt);
            if (it->second.first < it->second.second) cell += '*';
        }
        col[row.name] = cell.empty() ? "-" : cell;
    }
    return col;
}

struct Table {
    std::vector<std::string> backends;
    std::map<std::string, Column> columns;
};

std::vector<std::string> cells_of(const std::string &line) {
    std::vector<std::string> cells;
    std::string cur;
    for (std::size_t i = 1; i < line.size(); ++i) {
        if (line[i] == '|') {
            std::size_t a = cur.find_first_not_of(' '), b = cur.find_last_not_of(' ');
            cells.push_back(a == std::string::npos ? "" : cur.substr(a, b - a + 1));
            cur.clear();
        } else {
            cur += line[i];
        }
    }
    return cells;
}

// The table between the markers of an existing document.
Table parse(const std::string &block) {
    Table t;
    std::istringstream in(block);
    std::string line;
    int row = 0;
    std::size_t first = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] != '|') continue;
        std::vector<std::string> cells = cells_of(line);
        if (row++ == 0) {
            // The generated columns before the backends' (an older table lacks "dtypes").
            while (first < cells.size() && (cells[first] == "op" || cells[first] == "kind" || cells[first] == "dtypes"))
                ++first;
            for (std::size_t i = first; i < cells.size(); ++i) t.backends.push_back(cells[i]);
            continue;
        }
        if (cells.size() < 2 || cells[0].rfind("---", 0) == 0) continue;
        for (std::size_t i = first; i < cells.size() && i - first < t.backends.size(); ++i)
            t.columns[t.backends[i - first]][cells[0]] = cells[i];
    }
    return t;
}

std::string render(const Table &t) {
    std::string out = "| op | kind | dtypes |";
    for (const std::string &b : t.backends) out += " " + b + " |";
    out += "\n| --- | --- | --- |";
    for (std::size_t i = 0; i < t.backends.size(); ++i) out += " --- |";
    out += "\n";
    for (const OpRow &row : op_rows()) {
        out += "| " + std::string(row.name) + " | " + kind_name(row.kind) + " | " + dtypes_text(row) + " |";
        for (const std::string &b : t.backends) {
            auto col = t.columns.find(b);
            std::string text = "?";  // an op newer than the committed column
            if (col != t.columns.end() && col->second.count(row.name)) text = col->second.at(row.name);
            out += " " + text + " |";
        }
        out += "\n";
    }
    return out;
}

std::string read_file(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

int run_support(const Options &o, const std::vector<Case> &selected_cases, const Backend &cpu,
                const std::vector<Backend> &backends) {
    const bool document = o.markdown || !o.update.empty() || !o.check.empty();
    // The document always covers every case, whatever the filters.
    const std::vector<Case> cases = document ? all_cases() : selected_cases;
    Table fresh;
    for (const Backend &b : backends) {
        fresh.backends.push_back(b.target.name);
        fresh.columns[b.target.name] = column(cases, cpu, b);
    }
    if (!document) {
        std::printf("%-20s", "op (claimed dtypes)");
        for (const Backend &b : backends) std::printf(" %-24s", b.target.name.c_str());
        std::printf("\n");
        for (const OpRow &row : op_rows()) {
            bool any_case = false;
            for (const Case &c : cases) any_case |= c.op == row.op;
            if (!any_case) continue;
            std::printf("%-20s", row.name);
            for (const Backend &b : backends) std::printf(" %-24s", fresh.columns[b.target.name][row.name].c_str());
            std::printf("\n");
        }
        std::printf(
            "\n'*': some cases of that dtype are not claimed (shapes, layouts or params left to the fallback)\n");
        return 0;
    }
    if (o.markdown && o.update.empty() && o.check.empty()) {
        std::fputs(render(fresh).c_str(), stdout);
        return 0;
    }
    const std::string path = o.update.empty() ? o.check : o.update;
    const std::string text = read_file(path);
    const std::size_t begin = text.find(k_begin), end = text.find(k_end);
    if (begin == std::string::npos || end == std::string::npos || end < begin)
        throw std::runtime_error(path + ": no '" + k_begin + "' ... '" + k_end + "' block");
    const std::size_t body = begin + std::string(k_begin).size() + 1;
    const std::string old_block = text.substr(body, end - body);
    // Backends this build does not have keep their committed column.
    Table merged = parse(old_block);
    for (const Backend &b : backends) {
        if (std::find(merged.backends.begin(), merged.backends.end(), b.target.name) == merged.backends.end())
            merged.backends.push_back(b.target.name);
        merged.columns[b.target.name] = fresh.columns[b.target.name];
    }
    const std::string new_block = render(merged);
    if (new_block == old_block) {
        std::printf("%s is up to date for %zu backend(s)\n", path.c_str(), backends.size());
        return 0;
    }
    if (!o.update.empty()) {
        std::ofstream out(path);
        out << text.substr(0, body) << new_block << text.substr(end);
        if (!out) throw std::runtime_error("cannot write " + path);
        std::printf("updated %s\n", path.c_str());
        return 0;
    }
    Table old = parse(old_block);
    std::printf("%s is stale:\n", path.c_str());
    for (const Backend &b : backends) {
        const std::string &name = b.target.name;
        if (!old.columns.count(name)) {
            std::printf("  no column for backend %s\n", name.c_str());
            continue;
        }
        for (const OpRow &row : op_rows()) {
            std::string was = old.columns[name].count(row.name) ? old.columns[name][row.name] : "(no row)";
            const std::string &now = merged.columns[name][row.name];
            if (was != now)
                std::printf("  %s on %s: documented '%s', claims now '%s'\n", row.name, name.c_str(), was.c_str(),
                            now.c_str());
        }
    }
    if (new_block.size() && old_block.size() && new_block != old_block)
        std::printf("regenerate it: tinyfin-conform support --update %s (see docs/ops.md)\n", path.c_str());
    return 1;
}

}  // namespace conform
