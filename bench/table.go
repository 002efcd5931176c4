package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a header and rows of cells, written as aligned plain text for a
// terminal or as a markdown table.
type Table struct {
	Header []string
	Align  string // one byte per column: 'r' aligns right (numbers), else left
	Rows   [][]string
}

// right reports whether column col aligns right.
func (t *Table) right(col int) bool { return col < len(t.Align) && t.Align[col] == 'r' }

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// widths returns each column's width in runes.
func (t *Table) widths() []int {
	w := make([]int, len(t.Header))
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range row {
			if i < len(w) {
				w[i] = max(w[i], utf8.RuneCountInString(c))
			}
		}
	}
	return w
}

// pad aligns c in a column of width w.
func (t *Table) pad(col int, c string, w int) string {
	fill := strings.Repeat(" ", max(0, w-utf8.RuneCountInString(c)))
	if t.right(col) {
		return fill + c
	}
	return c + fill
}

// WriteText writes the table as columns separated by two spaces.
func (t *Table) WriteText(w io.Writer) error {
	widths := t.widths()
	var b strings.Builder
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		cells := make([]string, len(widths))
		for i := range widths {
			c := ""
			if i < len(row) {
				c = row[i]
			}
			cells[i] = t.pad(i, c, widths[i])
		}
		b.WriteString(strings.TrimRight(strings.Join(cells, "  "), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the table in GitHub's markdown, escaping '|' in cells.
func (t *Table) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range t.Header {
			c := ""
			if i < len(cells) {
				c = strings.ReplaceAll(cells[i], "|", `\|`)
			}
			fmt.Fprintf(&b, " %s |", c)
		}
		b.WriteByte('\n')
	}
	line(t.Header)
	b.WriteString("|")
	for i := range t.Header {
		if t.right(i) {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteByte('\n')
	for _, row := range t.Rows {
		line(row)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
