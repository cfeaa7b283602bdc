#include "fs/daemon/manual.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fs/daemon/option_table.h"

namespace cudafs {

// docs/cudafs.8.md, written into the build tree by CMake (manual_text.cc).
extern const char kManualMarkdown[];

namespace {

// Text escaped for roff, in the middle of a line: no "\&" guard, which only
// a line's start needs.
std::string Escaped(absl::string_view text, bool line_start) {
  std::string out = RoffEscape(text);
  if (!line_start && absl::StartsWith(out, "\\&")) out.erase(0, 2);
  return out;
}

// The markdown escapes (\*, \\, \`) undone.
std::string Unescaped(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && absl::StrContains("*\\`", text[i + 1])) ++i;
    out += text[i];
  }
  return out;
}

// Where `marker` closes from `from` on, skipping escaped characters;
// npos when it does not. As in markdown, emphasis neither opens before a
// space nor closes after one.
size_t Closing(absl::string_view text, size_t from, absl::string_view marker) {
  const bool emphasis = marker != "`";
  if (emphasis && (from >= text.size() || text[from] == ' ')) return absl::string_view::npos;
  for (size_t i = from; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text.substr(i, marker.size()) == marker && !(emphasis && text[i - 1] == ' ')) {
      return i;
    }
  }
  return absl::string_view::npos;
}

// One line of text: **bold**, `literal` (bold) and *italic* in fonts, the
// rest escaped. A marker that does not close is text.
std::string InlineRoff(absl::string_view line) {
  std::string out;
  std::string plain;
  auto flush = [&] {
    absl::StrAppend(&out, Escaped(Unescaped(plain), out.empty()));
    plain.clear();
  };
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    absl::string_view marker = c == '`' ? "`" : absl::StartsWith(line.substr(i), "**") ? "**" : "*";
    if (c == '\\' && i + 1 < line.size()) {
      absl::StrAppend(&plain, line.substr(i, 2));
      ++i;
      continue;
    }
    const size_t end =
        (c == '`' || c == '*') ? Closing(line, i + marker.size(), marker) : absl::string_view::npos;
    if (end == absl::string_view::npos || end == i + marker.size()) {
      plain += c;
      continue;
    }
    flush();
    const absl::string_view inner = line.substr(i + marker.size(), end - i - marker.size());
    absl::StrAppend(&out, marker == "*" ? "\\fI" : "\\fB",
                    Escaped(marker == "`" ? std::string(inner) : Unescaped(inner), out.empty()),
                    "\\fR");
    i = end + marker.size() - 1;
  }
  flush();
  return out;
}

// "# cudafs(8) System Administration" as .TH.
std::string TitleRoff(absl::string_view title, absl::string_view version) {
  const size_t open = title.find('(');
  const size_t close = title.find(')', open);
  if (open == absl::string_view::npos || close == absl::string_view::npos) {
    return absl::StrCat(".TH ", RoffEscape(absl::AsciiStrToUpper(title)), "\n");
  }
  const absl::string_view name = title.substr(0, open);
  return absl::StrCat(".TH ", RoffEscape(absl::AsciiStrToUpper(name)), " ",
                      title.substr(open + 1, close - open - 1), " \"\" \"", RoffEscape(name), " ",
                      RoffEscape(version), "\" \"",
                      RoffEscape(absl::StripAsciiWhitespace(title.substr(close + 1))), "\"\n");
}

bool IsBlockStart(absl::string_view line) {
  return line.empty() || absl::StartsWith(line, "#") || absl::StartsWith(line, "```") ||
         absl::StartsWith(line, "<!--") || absl::StartsWith(line, ": ");
}

}  // namespace

std::string ManualRoff(absl::string_view markdown, absl::string_view version,
                       absl::string_view options) {
  const std::vector<absl::string_view> lines = absl::StrSplit(markdown, '\n');
  std::string out;
  // A paragraph after another block starts with .PP; the first after a
  // heading needs none.
  bool after_block = false;
  auto paragraph_break = [&] {
    if (after_block) out += ".PP\n";
    after_block = true;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.empty()) continue;
    if (line == "<!-- options -->") {
      absl::StrAppend(&out, options);
      after_block = true;
    } else if (absl::StartsWith(line, "<!--")) {
      while (i < lines.size() && !absl::StrContains(lines[i], "-->")) ++i;
    } else if (absl::StartsWith(line, "# ")) {
      out += TitleRoff(line.substr(2), version);
      after_block = false;
    } else if (absl::StartsWith(line, "## ") || absl::StartsWith(line, "### ")) {
      const bool section = absl::StartsWith(line, "## ");
      absl::StrAppend(&out, section ? ".SH " : ".SS ", RoffEscape(line.substr(section ? 3 : 4)),
                      "\n");
      after_block = false;
    } else if (absl::StartsWith(line, "```")) {
      paragraph_break();
      out += ".nf\n.RS\n";
      for (++i; i < lines.size() && !absl::StartsWith(lines[i], "```"); ++i) {
        absl::StrAppend(&out, lines[i].empty() ? "\\&" : RoffEscape(lines[i]), "\n");
      }
      out += ".RE\n.fi\n";
    } else if (i + 1 < lines.size() && absl::StartsWith(lines[i + 1], ": ")) {
      // A term and its definition, which may go on over more lines.
      absl::StrAppend(&out, ".TP\n", InlineRoff(line), "\n", InlineRoff(lines[++i].substr(2)),
                      "\n");
      while (i + 1 < lines.size() && !IsBlockStart(lines[i + 1])) {
        absl::StrAppend(&out, InlineRoff(lines[++i]), "\n");
      }
      after_block = true;
    } else {
      paragraph_break();
      for (;; ++i) {
        absl::string_view text = lines[i];
        // A line ending in one backslash breaks there.
        const bool breaks = absl::EndsWith(text, "\\") && !absl::EndsWith(text, "\\\\");
        if (breaks) text.remove_suffix(1);
        absl::StrAppend(&out, InlineRoff(text), breaks ? "\n.br\n" : "\n");
        if (i + 1 == lines.size() || IsBlockStart(lines[i + 1])) break;
      }
    }
  }
  return out;
}

std::string ManualPage(absl::string_view version) {
  return ManualRoff(kManualMarkdown, version, MountOptionsRoff());
}

}  // namespace cudafs
