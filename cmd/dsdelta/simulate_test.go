package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSimulateEndsTheStreamNow runs a default simulation as a new user
// would, and checks that status then shows the lag of a stream that is
// live (a few minutes at most), not the months since dssim's fixed dates.
func TestSimulateEndsTheStreamNow(t *testing.T) {
	dir := t.TempDir()
	src, lake := filepath.Join(dir, "src"), filepath.Join(dir, "lake")
	if out, errOut, code := cli(t, "simulate", "--out", src, "--rows", "4", "--changes", "12"); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 0 {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := cli(t, "status", "--lake", lake, "--json")
	if code != 0 {
		t.Fatalf("status: %d\n%s\n%s", code, out, errOut)
	}
	tables := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var st statusOutput
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if st.LagSeconds == nil || *st.LagSeconds < 0 || *st.LagSeconds > (5*time.Minute).Seconds() {
			t.Errorf("%s: lag %v s, want at most 5 minutes", st.Table, st.LagSeconds)
		}
		tables++
	}
	if tables != 3 {
		t.Fatalf("status shows %d tables, want 3:\n%s", tables, out)
	}
}

// TestSimulateWithFixedDatesStartsOnTheFixedDate: --fixed-dates writes the
// files of dssim's fixed dates, from 2026-01-05 at 10:00, as tests need.
func TestSimulateWithFixedDatesStartsOnTheFixedDate(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	if out, errOut, code := cli(t, "simulate", "--fixed-dates", "--out", src, "--rows", "4", "--changes", "12"); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(src, "shop_customers", "2026", "01", "05", "10", "00")); err != nil {
		t.Fatalf("no files in the fixed start's folder: %v", err)
	}
}
