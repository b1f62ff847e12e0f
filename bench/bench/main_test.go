package main

import (
	"strings"
	"testing"
)

func TestSummaryMarksUnmeasuredFiguresNA(t *testing.T) {
	r := &report{decodeRatio: 1.5, peakMiB: 300}
	got := r.summary()
	want := "SUMMARY decode_json_vs_duckdb=1.50 merge_vs_duckdb=NA scaling_10M_over_100k=NA peak_mib=300 latency_p50_ms=NA"
	if got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	if md := r.markdown(); !strings.Contains(md, "| JSON decode ≤ 1.0× DuckDB | 1.50× | **not met** |") {
		t.Errorf("markdown does not mark the missed decode target:\n%s", md)
	}
}

func TestHumanRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int64
		want string
	}{
		{"round millions read as M", 10_000_000, "10M"},
		{"round thousands read as k", 100_000, "100k"},
		{"other millions keep two decimals", 1_521_280, "1.52M"},
		{"other counts of ten thousand and more keep a decimal of k", 131_840, "131.8k"},
		{"small counts are plain", 9_500, "9500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := humanRows(tc.n); got != tc.want {
				t.Errorf("humanRows(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

func TestMarkdownListsEveryPastRunAndThisOne(t *testing.T) {
	r := &report{mergeRatio: 0.8}
	md := r.markdown()
	for _, p := range pastRuns {
		if !strings.Contains(md, "| "+p.commit+" | "+p.change+" |") {
			t.Errorf("markdown lacks the run %s", p.commit)
		}
	}
	if !strings.Contains(md, "| this run | "+thisChange+" | NA | 0.80× |") {
		t.Errorf("markdown lacks this run's figures:\n%s", md)
	}
}
