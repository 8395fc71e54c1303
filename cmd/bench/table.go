package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// table is a fixed-width text table: the first column left-aligned, the
// others right-aligned, with notes printed under it.
type table struct {
	title string
	head  []string
	rows  [][]string
	notes []string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "\n== %s ==\n", t.title)
	widths := make([]int, len(t.head))
	for _, r := range append([][]string{t.head}, t.rows...) {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	line := func(r []string) {
		var b strings.Builder
		for i, c := range r {
			if i >= len(widths) {
				break
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if len(t.head) > 0 {
		line(t.head)
		total := 0
		for _, wd := range widths {
			total += wd
		}
		fmt.Fprintln(w, strings.Repeat("-", total+2*(len(widths)-1)))
	}
	for _, r := range t.rows {
		line(r)
	}
	for _, n := range t.notes {
		fmt.Fprintln(w, "  "+n)
	}
}

// f formats a float with n decimals.
func f(x float64, n int) string { return fmt.Sprintf("%.*f", n, x) }

// d formats an integer.
func d(n int) string { return fmt.Sprint(n) }

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
