package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyAndRebuildInPassesOfFewKeys: --max-keys bounds the keys a pass
// holds without changing what verify and rebuild report.
func TestVerifyAndRebuildInPassesOfFewKeys(t *testing.T) {
	dir := t.TempDir()
	src, lake := filepath.Join(dir, "src"), filepath.Join(dir, "lake")
	if out, errOut, code := cli(t, "simulate", "--out", src, "--rows", "12", "--changes", "60", "--seed", "9"); code != 0 {
		t.Fatalf("simulate: %d %s %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 0 {
		t.Fatalf("run: %d\n%s\n%s", code, out, errOut)
	}
	table := filepath.Join(lake, "shop", "customers")
	whole, errOut, code := cli(t, "verify", table)
	if code != 0 {
		t.Fatalf("verify: %s %s", whole, errOut)
	}
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
