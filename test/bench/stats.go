package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// series is one measured quantity: a name and its samples.
type series struct {
	name    string
	samples []time.Duration
}

func (s *series) add(d time.Duration) { s.samples = append(s.samples, d) }

// summary is the statistics printed for a series.
type summary struct {
	n                int
	median, p90, min time.Duration
	max              time.Duration
}

// summarize computes median (mean of the two middle samples for even n), p90 (nearest rank),
// min and max. An empty series gives a zero summary.
func (s *series) summarize() summary {
	n := len(s.samples)
	if n == 0 {
		return summary{}
	}
	xs := slices.Clone(s.samples)
	slices.Sort(xs)
	med := xs[n/2]
	if n%2 == 0 {
		med = (xs[n/2-1] + xs[n/2]) / 2
	}
	rank := (90*n + 99) / 100 // ceil(0.9 n), 1-based
	return summary{n: n, median: med, p90: xs[max(rank, 1)-1], min: xs[0], max: xs[n-1]}
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// printTable writes one row per series: n, median, p90, min, max in milliseconds.
func printTable(w io.Writer, title string, rows []*series) {
	width := len("measurement")
	for _, r := range rows {
		width = max(width, len(r.name))
	}
	fmt.Fprintf(w, "\n%s\n", title)
	fmt.Fprintf(w, "  %-*s %5s %10s %10s %10s %10s\n", width, "measurement", "n", "median ms", "p90 ms", "min ms", "max ms")
	fmt.Fprintf(w, "  %s\n", strings.Repeat("-", width+50))
	for _, r := range rows {
		s := r.summarize()
		fmt.Fprintf(w, "  %-*s %5d %10s %10s %10s %10s\n", width, r.name, s.n, ms(s.median), ms(s.p90), ms(s.min), ms(s.max))
	}
}

// ratio is a/b as a float, 0 when b is zero.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
