package main

import (
	"strings"
)

// A span is the text of one code span (`…`), newlines folded to spaces.
type span struct {
	line int // 1-based line of its opening backtick
	text string
}

// A block is one fenced code block.
type block struct {
	line      int    // 1-based line of its first content line
	info      string // the fence's info string: "go", "sh", "" …
	text      string
	directive string // the <!-- docs-check: … --> comment right above the fence, without the marker
	hasDir    bool
	dirLine   int // line of the directive's opening <!--
}

// A markdown document reduced to what the checks read: code spans outside
// fenced blocks and HTML comments, and the fenced blocks.
type markdown struct {
	spans  []span
	blocks []block
}

const directiveMarker = "docs-check:"

// parseMarkdown extracts the code spans and fenced blocks of src, only of
// lines from..to (1-based, inclusive; to 0 for the end), the part of
// CHANGELOG.md that is checked. It follows CommonMark where the docs need it:
// fences of ``` or ~~~ at any indentation, closed by a fence of the same
// character at least as long; a code span opened by N backticks closes at the
// next run of exactly N and may continue over the lines of its paragraph.
func parseMarkdown(src string, from, to int) markdown {
	var md markdown
	lines := strings.Split(src, "\n")
	if to <= 0 || to > len(lines) {
		to = len(lines)
	}
	var (
		para      []string // the paragraph's lines, scanned for spans when it ends
		paraStart int
		// The last HTML comment that ended on the line before: a directive
		// for a fence that opens on the next line.
		lastComment     string
		lastCommentEnd  = -1
		lastCommentLine int
	)
	flush := func() {
		if len(para) > 0 {
			md.spans = append(md.spans, codeSpans(para, paraStart)...)
		}
		para = nil
	}
	for i := from - 1; i < to; i++ {
		line := lines[i]
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			flush()
			indent := len(line) - len(trimmed)
			fc := trimmed[0]
			n := len(trimmed) - len(strings.TrimLeft(trimmed, string(fc)))
			b := block{line: i + 2, info: strings.TrimSpace(trimmed[n:])}
			if f := strings.Fields(b.info); len(f) > 0 {
				b.info = f[0]
			}
			if lastCommentEnd == i-1 {
				if d, ok := strings.CutPrefix(strings.TrimSpace(lastComment), directiveMarker); ok {
					b.directive, b.hasDir, b.dirLine = strings.TrimSpace(d), true, lastCommentLine
				}
			}
			var body []string
			j := i + 1
			for ; j < len(lines); j++ {
				t := strings.TrimLeft(lines[j], " \t")
				if strings.HasPrefix(t, strings.Repeat(string(fc), n)) && strings.Trim(t, string(fc)+" \t") == "" {
					break
				}
				l := lines[j]
				// Content is indented like its fence in a list item.
				for k := 0; k < indent && len(l) > 0 && (l[0] == ' ' || l[0] == '\t'); k++ {
					l = l[1:]
				}
				body = append(body, l)
			}
			b.text = strings.Join(body, "\n")
			md.blocks = append(md.blocks, b)
			i = j
		case strings.HasPrefix(trimmed, "<!--"):
			flush()
			start := i
			var text strings.Builder
			rest := strings.TrimPrefix(trimmed, "<!--")
			for {
				if before, _, ok := strings.Cut(rest, "-->"); ok {
					text.WriteString(before)
					break
				}
				text.WriteString(rest)
				text.WriteString("\n")
				if i+1 >= len(lines) {
					break
				}
				i++
				rest = lines[i]
			}
			lastComment, lastCommentEnd, lastCommentLine = text.String(), i, start+1
		case strings.TrimSpace(line) == "":
			flush()
		default:
			if len(para) == 0 {
				paraStart = i + 1
			}
			para = append(para, line)
		}
	}
	flush()
	return md
}

// codeSpans returns the code spans of one paragraph whose first line is
// line first.
func codeSpans(para []string, first int) []span {
	text := strings.Join(para, "\n")
	var spans []span
	lineAt := func(off int) int { return first + strings.Count(text[:off], "\n") }
	for i := 0; i < len(text); {
		if text[i] == '\\' && i+1 < len(text) {
			i += 2 // an escaped backtick is literal
			continue
		}
		if text[i] != '`' {
			i++
			continue
		}
		n := run(text, i)
		open := i
		i += n
		// Find the closing run of exactly n backticks.
		j := i
		closed := -1
		for j < len(text) {
			k := strings.IndexByte(text[j:], '`')
			if k < 0 {
				break
			}
			j += k
			m := run(text, j)
			if m == n {
				closed = j
				break
			}
			j += m
		}
		if closed < 0 {
			continue // literal backticks
		}
		content := strings.ReplaceAll(text[i:closed], "\n", " ")
		spans = append(spans, span{line: lineAt(open), text: strings.TrimSpace(content)})
		i = closed + n
	}
	return spans
}

func run(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// unreleasedRange returns the lines (1-based, inclusive) of CHANGELOG.md's
// [Unreleased] section, the part that describes the code as it is; the
// sections of released versions are history and may name what is gone.
// ok is false when there is no such section.
func unreleasedRange(src string) (from, to int, ok bool) {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "## ") {
			continue
		}
		if from > 0 {
			return from, i, true
		}
		if strings.HasPrefix(strings.ToLower(l), "## [unreleased]") {
			from = i + 1
		}
	}
	return from, len(lines), from > 0
}
