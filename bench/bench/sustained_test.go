package main

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
)

// lagsOf makes lags in milliseconds.
func lagsOf(msecs ...int) []time.Duration {
	out := make([]time.Duration, len(msecs))
	for i, m := range msecs {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

// repeat is n copies of msec.
func repeat(msec, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = msec
	}
	return out
}

func TestJudgeLagsBoundsAStep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lags     []time.Duration
		unmerged int
		bounded  bool
		why      string
	}{
		{"steady lags under the bound are bounded", lagsOf(900, 1200, 1100, 950, 1300, 1000), 0, true, ""},
		{"a file not merged in time is unbounded", lagsOf(900, 1200, 1100), 1, false, "not merged"},
		{"no file merged is unbounded", nil, 0, false, "no file merged"},
		{"a p99 over the bound is unbounded", lagsOf(append(repeat(1000, 90), repeat(11_000, 10)...)...), 0, false, "p99 over"},
		{"lags that keep growing are unbounded", lagsOf(1000, 1100, 1000, 3000, 4000, 5000, 6000, 7000, 8000), 0, false, "growing"},
		{"lags that double below a second are noise, not growth", lagsOf(200, 250, 220, 500, 600, 550), 0, true, ""},
		{"a single late file under the bound is bounded", lagsOf(append(repeat(1000, 200), 9000)...), 0, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := judgeLags(tc.lags, tc.unmerged)
			if v.bounded != tc.bounded || !strings.Contains(v.why, tc.why) {
				t.Errorf("judgeLags = bounded %v (%q); want %v (%q)", v.bounded, v.why, tc.bounded, tc.why)
			}
		})
	}
	t.Run("the percentiles are nearest-rank", func(t *testing.T) {
		var msecs []int
		for i := 1; i <= 200; i++ {
			msecs = append(msecs, i)
		}
		v := judgeLags(lagsOf(msecs...), 0)
		if v.p50 != 100*time.Millisecond || v.p99 != 198*time.Millisecond || v.max != 200*time.Millisecond {
			t.Errorf("p50 %v, p99 %v, max %v; want 100ms, 198ms, 200ms", v.p50, v.p99, v.max)
		}
		if v.firstThird != 33*time.Millisecond || v.lastThird != 167*time.Millisecond {
			t.Errorf("thirds' medians %v and %v; want 33ms and 167ms", v.firstThird, v.lastThird)
		}
	})
}

func TestBestStepIsTheHighestBoundedRate(t *testing.T) {
	steps := []sustainedStep{
		{rate: 20_000, verdict: lagVerdict{bounded: true}},
		{rate: 40_000, verdict: lagVerdict{bounded: true}, producerBehind: true, achieved: 36_000},
		{rate: 60_000, verdict: lagVerdict{bounded: false}},
	}
	if got := bestStep(steps); got != 1 || steps[got].figure() != 36_000 {
		t.Errorf("bestStep = %d; want 1, at the rate the producer achieved (36000)", got)
	}
	if got := bestStep(steps[2:]); got != -1 {
		t.Errorf("bestStep of unbounded steps = %d; want -1", got)
	}
}

func TestEventMixIsSeventyTwentyTenOfLiveKeys(t *testing.T) {
	const loadEvents = 20_000
	keys := 0
	for j := range loadEvents {
		if backfillbench.IsKey(j) {
			keys++
		}
	}
	k := newLiveKeys(loadEvents, keys)
	live := map[int]bool{}
	for j := range loadEvents {
		if backfillbench.IsKey(j) {
			live[j] = true
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	counts := map[backfillbench.Op]int{}
	const n = 100_000
	for range n {
		c := k.nextChange(rng)
		counts[c.op]++
		switch c.op {
		case backfillbench.Insert:
			if live[c.key] || c.key < loadEvents {
				t.Fatalf("insert of key %d, which exists or was loaded", c.key)
			}
			live[c.key] = true
		case backfillbench.Update, backfillbench.Delete:
			if !live[c.key] {
				t.Fatalf("%v of key %d, which is not live", c.op, c.key)
			}
			if c.op == backfillbench.Delete {
				delete(live, c.key)
			}
		}
	}
	for op, want := range map[backfillbench.Op]float64{backfillbench.Update: 0.7, backfillbench.Insert: 0.2, backfillbench.Delete: 0.1} {
		if got := float64(counts[op]) / n; got < want-0.01 || got > want+0.01 {
			t.Errorf("op %d: %.3f of the events; want %.2f ± 0.01", op, got, want)
		}
	}
	if k.live != len(live) {
		t.Errorf("liveKeys counts %d live keys; the events leave %d", k.live, len(live))
	}
}

func TestProducerWritesDatastreamChangeFilesInPlace(t *testing.T) {
	dir := t.TempDir()
	source, aside := filepath.Join(dir, "source"), filepath.Join(dir, "aside")
	for _, d := range []string{source, aside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := newProducer(source, aside, newLiveKeys(3000, 2980))
	now := time.Date(2026, 12, 3, 20, 15, 30, 0, time.UTC)
	f, err := p.render(now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.dest); !os.IsNotExist(err) {
		t.Fatalf("a rendered file is in place before place: %v", err)
	}
	if _, err := p.place(f); err != nil {
		t.Fatal(err)
	}
	if want := "shop_accounts/2026/12/03/20/15/"; !strings.HasPrefix(f.name, want) || !strings.Contains(f.name, "_mysql-cdc-binlog_") {
		t.Errorf("file %s; want it in %s, named for mysql-cdc-binlog", f.name, want)
	}
	fh, err := os.Open(filepath.Join(source, filepath.FromSlash(f.name)))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	var events int
	last := int64(-1)
	for sc.Scan() {
		var e struct {
			SourceTimestamp string `json:"source_timestamp"`
			SortKeys        []any  `json:"sort_keys"`
			Metadata        struct {
				LogFile     string `json:"log_file"`
				LogPosition int64  `json:"log_position"`
				ChangeType  string `json:"change_type"`
				IsDeleted   bool   `json:"is_deleted"`
			} `json:"source_metadata"`
			Payload map[string]any `json:"payload"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v", events+1, err)
		}
		events++
		if e.Metadata.LogPosition <= last || e.Metadata.LogFile != backfillbench.ChangeLogFile || len(e.SortKeys) != 3 {
			t.Fatalf("line %d: position %s:%d after %d, sort keys %v; want increasing positions in %s", events, e.Metadata.LogFile, e.Metadata.LogPosition, last, e.SortKeys, backfillbench.ChangeLogFile)
		}
		last = e.Metadata.LogPosition
		if e.SourceTimestamp != "2026-12-03T20:15:30.000Z" || (e.Metadata.ChangeType == "DELETE") != e.Metadata.IsDeleted || len(e.Payload) != 7 {
			t.Fatalf("line %d: %s %s deleted %v, %d payload columns", events, e.SourceTimestamp, e.Metadata.ChangeType, e.Metadata.IsDeleted, len(e.Payload))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if events != eventsPerFile {
		t.Errorf("%d events in the file; want %d", events, eventsPerFile)
	}
}

func TestLoopPhasesSplitTheWallTime(t *testing.T) {
	var l loopPhases
	for _, p := range []int{phaseMerge, phaseMaintain, phaseIdle} {
		l.enter(p)
		time.Sleep(20 * time.Millisecond)
	}
	_, wall := l.totals()
	var sum time.Duration
	for p, w := range wall {
		if w < 20*time.Millisecond {
			t.Errorf("phase %d: %v of wall time; want at least the 20ms spent in it", p, w)
		}
		sum += w
	}
	if sum > time.Second {
		t.Errorf("the phases add up to %v; want about 60ms", sum)
	}
}
