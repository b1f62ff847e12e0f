package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// pairRatios compares each dsdelta run with the DuckDB run next to it, and
// takes the median: the middle ratio, or the mean of the two middle ones.
func TestPairRatiosComparesRunsSideBySide(t *testing.T) {
	ratios, median := pairRatios([]float64{3727, 3865, 4087, 4456, 4226}, []float64{2864, 2916, 2677, 3021, 2317})
	if got, want := joinf("%.2f", ratios), "1.30, 1.33, 1.53, 1.48, 1.82"; got != want {
		t.Errorf("ratios %s, want %s", got, want)
	}
	if got := fmt.Sprintf("%.2f", median); got != "1.48" {
		t.Errorf("median = %s, want 1.48", got)
	}
	if _, m := pairRatios([]float64{4, 6}, []float64{2, 2}); m != 2.5 {
		t.Errorf("median of two ratios = %v, want their mean 2.5", m)
	}
	if r, m := pairRatios([]float64{4}, nil); r != nil || m != 0 {
		t.Errorf("no DuckDB run: %v, %v; want none", r, m)
	}
}

func TestInterleaveRunsTheSidesInTurn(t *testing.T) {
	var got []string
	side := func(name string) func(int) error {
		return func(r int) error {
			got = append(got, fmt.Sprintf("%s%d", name, r))
			return nil
		}
	}
	if err := interleave(3, side("A"), side("B")); err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); s != "A0 B0 A1 B1 A2 B2" {
		t.Errorf("runs %s, want A0 B0 A1 B1 A2 B2", s)
	}
	t.Run("an error stops the runs", func(t *testing.T) {
		n := 0
		stop := errors.New("stop")
		err := interleave(5, func(int) error { n++; return nil }, func(r int) error {
			if r == 1 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 2 {
			t.Errorf("interleave = %v after %d runs of A, want stop after 2", err, n)
		}
	})
}

func TestVerdictFigures(t *testing.T) {
	for _, tc := range []struct {
		name, got, want string
	}{
		{"the median of an odd count is the middle value", fmt.Sprint(medianOf([]float64{5, 1, 9, 3, 7})), "5"},
		{"the median of an even count is the mean of the middle two", fmt.Sprint(medianOf([]float64{4, 1, 2, 3})), "2.5"},
		{"no runs have no median", fmt.Sprint(medianOf(nil)), "0"},
		{"the median run is the middle one by value", fmt.Sprint(medianIndex([]float64{50, 10, 40, 20, 30})), "4"},
		{"of an even count the median run is the lower middle one", fmt.Sprint(medianIndex([]float64{4, 1, 2, 3})), "2"},
		{"the ratio divides the medians", fmt.Sprintf("%.2f", medianRatio([]float64{100, 40, 45, 42, 44}, []float64{20, 21, 22, 200, 23})), "2.00"},
		{"a ratio without runs of a side is not measured", fmt.Sprint(medianRatio([]float64{1}, nil)), "0"},
		{"a spread reads min – median – max", spread("%.0f", []float64{120, 83, 90}), "83 – 90 – 120"},
		{"a spread of no runs is NA", spread("%.0f", nil), "NA"},
		{"a spread of one run is its value", spread("%.2f", []float64{79.744}), "79.74"},
		{"a ratio cell gives the run-by-run spread", ratioCell([]float64{40, 50, 60}, []float64{80, 100, 100}), "0.50× (run by run 0.50 – 0.50 – 0.60×)"},
		{"a ratio cell of one run gives the ratio alone", ratioCell([]float64{40}, []float64{80}), "0.50×"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}
