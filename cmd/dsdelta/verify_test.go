package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simulatedTable simulates a source of rows rows and changes changes and
// runs it into a lake; it returns the customers current-state table and
// what verify prints for it (which must pass).
func simulatedTable(t *testing.T, rows, changes, seed string) (table, verified string) {
	t.Helper()
	dir := t.TempDir()
	src, lake := filepath.Join(dir, "src"), filepath.Join(dir, "lake")
	if out, errOut, code := cli(t, "simulate", "--fixed-dates", "--out", src, "--rows", rows, "--changes", changes, "--seed", seed); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 0 {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	table = filepath.Join(lake, "shop", "customers")
	verified, errOut, code := cli(t, "verify", table)
	if code != 0 {
		t.Fatalf("verify: %s %s", verified, errOut)
	}
	return table, verified
}

// TestVerifyAndRebuildInPassesOfFewKeys: --max-keys bounds the keys a pass
// holds without changing what verify and rebuild report.
func TestVerifyAndRebuildInPassesOfFewKeys(t *testing.T) {
	table, whole := simulatedTable(t, "12", "60", "9")
	for _, cmd := range []string{"verify", "rebuild"} {
		out, errOut, code := cli(t, cmd, table, "--max-keys", "2", "-v")
		if code != 0 || out != whole {
			t.Fatalf("%s --max-keys 2: exit %d\n%s\nwant\n%s\n%s", cmd, code, out, whole, errOut)
		}
		if n := strings.Count(errOut, "replay pass done"); n < 3 {
			t.Fatalf("%s --max-keys 2 -v logged %d passes:\n%s", cmd, n, errOut)
		}
	}
	if _, errOut, code := cli(t, "verify", table, "--max-keys", "x"); code != 2 || !strings.Contains(errOut, "max-keys") {
		t.Fatalf("a bad --max-keys: exit %d %s", code, errOut)
	}
	if _, errOut, code := cli(t, "rebuild", "-h"); code != 0 || !strings.Contains(errOut, "usage: dsdelta rebuild [flags] TABLE") || !strings.Contains(errOut, "passes over ranges of keys") {
		t.Fatalf("rebuild -h: exit %d %s", code, errOut)
	}
}

// TestVerifyOfNoDsdeltaTableSaysWhy: a TABLE that is not a folder, or has
// no history beside it, is a usage error that names it.
func TestVerifyOfNoDsdeltaTableSaysWhy(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "shop", "customers")
	if err := os.MkdirAll(table, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, table, want string }{
		{"a missing folder", filepath.Join(dir, "nothere"), "not a directory"},
		{"a folder with no history beside it", table, "history table beside"},
		{"a folder given with a trailing slash", table + "/", "history table beside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"verify", "rebuild"} {
				_, errOut, code := cli(t, cmd, tc.table)
				if code != 2 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, strings.TrimSuffix(tc.table, "/")) {
					t.Fatalf("%s %s: exit %d %q, want 2, naming it and %q", cmd, tc.table, code, errOut, tc.want)
				}
			}
		})
	}
}

// TestRebuildModeConvertsATableAndRunFollowsTheConfiguredMode: a table
// run in mode current refuses a configuration in mode soft_delete, naming
// 'dsdelta rebuild --mode'; the rebuild converts it, verify checks it in
// its new mode, and the run then goes on.
func TestRebuildModeConvertsATableAndRunFollowsTheConfiguredMode(t *testing.T) {
	dir, lake := simulatedLake(t, "4")
	src := filepath.Join(dir, "src")
	cfg := filepath.Join(dir, "dsdelta.yaml")
	if err := os.WriteFile(cfg, []byte("tables:\n  shop.customers:\n    mode: soft_delete\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli(t, "simulate", "--fixed-dates", "--out", src, "--rows", "12", "--changes", "30", "--seed", "5"); code != 0 {
		t.Fatalf("simulate more: %d %s %s", code, out, errOut)
	}
	out, errOut, code := cli(t, "run", "--source", src, "--lake", lake, "--config", cfg)
	if code == 0 || !strings.Contains(out+errOut, "dsdelta rebuild --mode soft_delete") {
		t.Fatalf("run in another mode: exit %d\n%s\n%s", code, out, errOut)
	}
	table := filepath.Join(lake, "shop", "customers")
	if _, errOut, code := cli(t, "rebuild", "--mode", "softdelete", table); code != 2 || !strings.Contains(errOut, "current, soft_delete, scd2") {
		t.Fatalf("rebuild --mode softdelete: exit %d %s", code, errOut)
	}
	if out, errOut, code := cli(t, "rebuild", "--mode", "soft_delete", table); code != 0 || !strings.Contains(out, " 0 mismatches") {
		t.Fatalf("rebuild --mode soft_delete: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake, "--config", cfg); code != 0 {
		t.Fatalf("run after the rebuild: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "verify", table); code != 0 {
		t.Fatalf("verify in mode soft_delete: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "rebuild", "--mode", "scd2", table); code != 0 || !strings.Contains(out, " 0 mismatches") {
		t.Fatalf("rebuild --mode scd2: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "verify", table); code != 0 {
		t.Fatalf("verify in mode scd2: exit %d\n%s\n%s", code, out, errOut)
	}
}

// simulatedLake simulates a source with seed in a temporary folder and
// runs it into a lake there: it returns the folder and the lake.
func simulatedLake(t *testing.T, seed string) (dir, lake string) {
	t.Helper()
	dir = t.TempDir()
	src, lake := filepath.Join(dir, "src"), filepath.Join(dir, "lake")
	if out, errOut, code := cli(t, "simulate", "--fixed-dates", "--out", src, "--rows", "12", "--changes", "60", "--seed", seed); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 0 {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	return dir, lake
}
