package main

import (
	"strings"
	"testing"
	"time"
)

func TestSummaryMarksUnmeasuredFiguresNA(t *testing.T) {
	r := &report{decodeRatio: 1.5, peakMiB: 300}
	got := r.summary()
	want := "SUMMARY decode_json_vs_duckdb=1.50 merge_vs_duckdb=NA scaling_10M_over_100k=NA random_10M_over_100k=NA peak_mib=300 latency_p50_ms=NA latency_p99_ms=NA backfill_vs_duckdb=NA backfill_events_per_s=NA backfill_peak_mib=NA backfill_10M_over_1M=NA backfill_10M_peak_mib=NA scd2_vs_current=NA merge_us_per_changed_row_100k=NA merge_us_per_changed_row_1M=NA merge_us_per_changed_row_10M=NA latency_cold_ms=NA latency_first_ms=NA sustained_events_per_s=NA sustained_p50_ms=NA sustained_p99_ms=NA sustained_cores=NA sustained_peak_mib=NA"
	if got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	if md := r.markdown(); !strings.Contains(md, "| JSON decode ≤ 0.7× DuckDB | 1.50× | **not met** |") {
		t.Errorf("markdown does not mark the missed decode target:\n%s", md)
	}
}

func TestSummaryCarriesTheRandomDeletionVectorRatio(t *testing.T) {
	r := &report{scalingRatio: 1.8, randomDVRatio: 2.345}
	if got := r.summary(); !strings.Contains(got, " scaling_10M_over_100k=1.80 random_10M_over_100k=2.35 ") {
		t.Errorf("summary = %q, want random_10M_over_100k=2.35 after the clustered scaling", got)
	}
}

func TestSummaryAndTargetsCarryTheLatencyP99(t *testing.T) {
	r := &report{latencyP50: 210, latencyP99: 3060.4}
	if got, want := r.summary(), " latency_p50_ms=210 latency_p99_ms=3060 "; !strings.Contains(got, want) {
		t.Errorf("summary = %q, want it to contain %q", got, want)
	}
	if md := r.markdown(); !strings.Contains(md, "| latency p99 ≤ 2 s | 3060.40 ms | **not met** |") {
		t.Errorf("targets lack the p99 row:\n%s", md)
	}
}

// TestLatencyLineOfEveryEmulatorVersionIsRead: the LATENCY line of an
// emulator before cold_ms, before first_ms, and of this one are all read;
// the figures a line lacks are NA, and the first file of a new table is
// held to its goal.
func TestLatencyLineOfEveryEmulatorVersionIsRead(t *testing.T) {
	for _, tc := range []struct {
		name, line   string
		cold, first  float64
		summary, row string
	}{
		{"a line without cold_ms has neither figure", "LATENCY p50_ms=210 p99_ms=900 max_ms=950 files=80 tables=20",
			0, 0, " latency_cold_ms=NA latency_first_ms=NA", "| 210 ms | 900 ms | 950 ms | NA | NA |"},
		{"a line with cold_ms only has the cold start", "LATENCY p50_ms=210 p99_ms=900 max_ms=950 files=80 tables=20 cold_ms=3100",
			3100, 0, " latency_cold_ms=3100 latency_first_ms=NA", "| 210 ms | 900 ms | 950 ms | 3100 ms | NA |"},
		{"a line with both has both", "LATENCY p50_ms=210 p99_ms=900 max_ms=950 files=80 tables=20 cold_ms=3100 first_ms=640",
			3100, 640, " latency_cold_ms=3100 latency_first_ms=640", "| 210 ms | 900 ms | 950 ms | 3100 ms | 640 ms |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := latencyLine.FindStringSubmatch("go: downloading\n" + tc.line + "\nstopping...\n")
			if m == nil {
				t.Fatalf("%q not read", tc.line)
			}
			r := &report{}
			latencyReport(r, m, 20*time.Second)
			if r.latencyP50 != 210 || r.latencyP99 != 900 || r.latencyColdMs != tc.cold || r.latencyFirstMs != tc.first {
				t.Errorf("read p50 %v, p99 %v, cold %v, first %v", r.latencyP50, r.latencyP99, r.latencyColdMs, r.latencyFirstMs)
			}
			if got := r.summary(); !strings.Contains(got, tc.summary) {
				t.Errorf("summary = %q, want it to contain %q", got, tc.summary)
			}
			if md := r.markdown(); !strings.Contains(md, tc.row) {
				t.Errorf("the latency table lacks %q:\n%s", tc.row, md)
			}
		})
	}
	t.Run("the first file of a new table is held to 1000 ms", func(t *testing.T) {
		for _, tc := range []struct {
			first, verdict string
		}{{"640", "**met**"}, {"1400", "**not met**"}} {
			r := &report{}
			latencyReport(r, latencyLine.FindStringSubmatch("LATENCY p50_ms=210 p99_ms=900 max_ms=950 files=80 tables=20 cold_ms=3100 first_ms="+tc.first), 20*time.Second)
			want := "| first file of a new table ≤ 1000 ms on a warm stack | " + tc.first + " ms | " + tc.verdict + " |"
			if md := r.markdown(); !strings.Contains(md, want) {
				t.Errorf("targets lack %q:\n%s", want, md)
			}
		}
	})
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

func TestSummaryAndTargetsCarryTheBackfillFigures(t *testing.T) {
	r := &report{backfillRatio: 2.5, backfillEventsPerS: 123456.4, backfillPeakMiB: 2048.2, backfillStageMBs: 80, backfillScaleRatio: 1.21, backfillScalePeakMiB: 430.4}
	if got, want := r.summary(), " backfill_vs_duckdb=2.50 backfill_events_per_s=123456 backfill_peak_mib=2048 backfill_10M_over_1M=1.21 backfill_10M_peak_mib=430 scd2_vs_current=NA "; !strings.Contains(got, want) {
		t.Errorf("summary = %q, want it to contain %q", got, want)
	}
	md := r.markdown()
	for _, row := range []string{
		"| backfill ≤ 1.0× DuckDB | 2.50× | **not met** |",
		"| backfill ≥ 400k events/s | 123456 events/s | **not met** |",
		"| backfill peak RSS ≤ 512 MiB | 2048 MiB | **not met** |",
		"| backfill staging ≥ 100 MB/s of JSONL | 80.0 MB/s | **not met** |",
		"| backfill 10M / 1M per event ≤ 1.3× | 1.21× | **met** |",
		"| backfill 10M peak RSS ≤ 512 MiB | 430 MiB | **met** |",
	} {
		if !strings.Contains(md, row) {
			t.Errorf("targets lack the row %q:\n%s", row, md)
		}
	}
}

func TestHistoryListsTheBackfillKeysNAForEarlierRuns(t *testing.T) {
	r := &report{backfillRatio: 1.25, backfillEventsPerS: 150000, backfillPeakMiB: 400}
	md := r.historyMarkdown("x")
	if !strings.Contains(md, "| backfill vs DuckDB | backfill events/s | backfill peak MiB |") {
		t.Errorf("history header lacks the backfill keys:\n%s", md)
	}
	for _, p := range pastRuns {
		if p.backfill == "NA" && !strings.Contains(md, " "+p.p50+" | NA | NA | NA |") {
			t.Errorf("run %s does not show NA for the backfill keys:\n%s", p.commit, md)
		}
	}
	if !strings.Contains(md, "| 1.25× | 150000 | 400 |") {
		t.Errorf("history lacks this run's backfill figures:\n%s", md)
	}
}

func TestSelectScenarios(t *testing.T) {
	t.Run("no selection runs every scenario but those on request", func(t *testing.T) {
		got, err := selectScenarios("")
		if err != nil || len(got) != len(scenarios)-len(onlyOnRequest) || got["backfill_100M"] || !got["sustained"] {
			t.Errorf("selectScenarios(\"\") = %v, %v; want all of %v but %v", got, err, scenarios, onlyOnRequest)
		}
	})
	t.Run("a scenario run on request runs when named", func(t *testing.T) {
		got, err := selectScenarios("backfill_100M")
		if err != nil || len(got) != 1 || !got["backfill_100M"] {
			t.Errorf("selectScenarios(\"backfill_100M\") = %v, %v; want backfill_100M", got, err)
		}
	})
	t.Run("a list runs only the scenarios named", func(t *testing.T) {
		got, err := selectScenarios("backfill, decode")
		if err != nil || len(got) != 2 || !got["backfill"] || !got["decode"] {
			t.Errorf("selectScenarios = %v, %v; want backfill and decode", got, err)
		}
	})
	t.Run("an unknown name is an error", func(t *testing.T) {
		if _, err := selectScenarios("backfil"); err == nil {
			t.Error("selectScenarios(\"backfil\") did not fail")
		}
	})
}

func TestSummaryAndTargetsCarryTheSCD2Ratio(t *testing.T) {
	r := &report{scd2Ratio: 1.234}
	if got := r.summary(); !strings.Contains(got, " scd2_vs_current=1.23 ") {
		t.Errorf("summary = %q, want it to contain scd2_vs_current=1.23", got)
	}
	if md := r.markdown(); !strings.Contains(md, "| scd2 merge ≤ 2× current | 1.23× | **met** |") {
		t.Errorf("targets lack the scd2 row:\n%s", md)
	}
}

func TestSummaryAndHistoryCarryTheCostPerChangedRow(t *testing.T) {
	r := &report{mergeUsPerChangedRow: [3]float64{9.5, 16.71, 0}}
	if got, want := r.summary(), " merge_us_per_changed_row_100k=9.50 merge_us_per_changed_row_1M=16.71 merge_us_per_changed_row_10M=NA "; !strings.Contains(got, want) {
		t.Errorf("summary = %q, want it to contain %q", got, want)
	}
	if md := r.historyMarkdown("x"); !strings.Contains(md, "| 9.50 / 16.71 / NA |\n") {
		t.Errorf("history lacks this run's cost per changed row:\n%s", md)
	}
	if md := (&report{}).historyMarkdown("x"); !strings.Contains(md, "| NA | NA |\n") {
		t.Errorf("history of a run without merges does not show NA:\n%s", md)
	}
}
