package main

import (
	"fmt"
	"slices"
	"strings"
)

// The verdict rule (issue 31 item 4): a ratio that has a target compares
// the medians of at least verdictRuns runs of each side, the sides run in
// turn (A, B, A, B, ...) so that a slow spell of the shared host falls on
// both, and the report shows each side's min – median – max. On a loaded
// 2-core host one run of either side can read either side of a target,
// and a merge of 40–100 ms moves by a few milliseconds from run to run,
// which moves a ratio over it by tenths; the best of a few runs was the
// luckiest run, the median is the typical one.

// verdictRuns is how many runs each side of a ratio with a target gets,
// at the least.
const verdictRuns = 5

// interleave runs each side once a round, in the order given, for rounds
// rounds: A, B, A, B, ... It stops at the first error.
func interleave(rounds int, sides ...func(round int) error) error {
	for r := range rounds {
		for _, side := range sides {
			if err := side(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// medianOf is the median of xs (0 for none): the middle value, or the
// mean of the two middle ones.
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// medianIndex is the index in xs of its median run: the middle one by
// value, the lower of the two middle ones for an even count (-1 for
// none). The figures a run carries beside its time (cores busy, CPU time)
// are reported for that run.
func medianIndex(xs []float64) int {
	if len(xs) == 0 {
		return -1
	}
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case xs[a] < xs[b]:
			return -1
		case xs[a] > xs[b]:
			return 1
		}
		return 0
	})
	return idx[(len(idx)-1)/2]
}

// medianRatio is the verdict of the rule: the median of a over the median
// of b (0 when either has no runs).
func medianRatio(a, b []float64) float64 {
	ma, mb := medianOf(a), medianOf(b)
	if ma == 0 || mb == 0 {
		return 0
	}
	return ma / mb
}

// spread renders xs as min – median – max, each value with format: the
// value alone for one run, "NA" for none.
func spread(format string, xs []float64) string {
	switch len(xs) {
	case 0:
		return "NA"
	case 1:
		return fmt.Sprintf(format, xs[0])
	}
	return fmt.Sprintf(format+" – "+format+" – "+format, slices.Min(xs), medianOf(xs), slices.Max(xs))
}

// ratioCell renders the verdict of a over b and, for how far the host
// moved it, the spread of the run-by-run ratios (each a run over the run
// of the other side in the same round): "0.47× (run by run 0.41 – 0.47 –
// 0.55×)".
func ratioCell(a, b []float64) string {
	pairs, _ := pairRatios(a, b)
	if len(pairs) < 2 {
		return fmt.Sprintf("%.2f×", medianRatio(a, b))
	}
	return fmt.Sprintf("%.2f× (run by run %s×)", medianRatio(a, b), spread("%.2f", pairs))
}

// pairRatios are the ratios of each run of one side to the run of the
// other side in the same round, and their median.
func pairRatios(a, b []float64) (ratios []float64, median float64) {
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			ratios = append(ratios, a[i]/b[i])
		}
	}
	return ratios, medianOf(ratios)
}

// joinf renders xs with format, separated by commas.
func joinf(format string, xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(s, ", ")
}

// each is f of every run, in run order.
func each[T any](runs []T, f func(T) float64) []float64 {
	xs := make([]float64, len(runs))
	for i, r := range runs {
		xs[i] = f(r)
	}
	return xs
}
