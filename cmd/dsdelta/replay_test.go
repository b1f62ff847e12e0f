package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayExitCodes replays a file no fix can make readable: replay
// exits 3 while it stays quarantined, as run does, and 0 once its source
// is gone, which run does not count either.
func TestReplayExitCodes(t *testing.T) {
	src, lake := simulated(t)
	name := writeSource(t, src, "shop_customers/2026/01/05/23/59/zz_mysql-cdc-binlog_1_0_0.jsonl", "{not json\n")
	if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 3 {
		t.Fatalf("run = %d, want 3 for the quarantined file\n%s\n%s", code, out, errOut)
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"replaying the quarantined files exits 3 when one is quarantined again", nil},
		{"replaying the file by name exits 3 when it is quarantined again", []string{name}},
		{"replaying every file exits 3 when one is quarantined again", []string{"--all"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := cli(t, append([]string{"replay", "--source", src, "--lake", lake}, tt.args...)...)
			if code != 3 || !strings.Contains(out, "still bad: "+name+": ") || !strings.Contains(out, "1 still quarantined") {
				t.Fatalf("replay = %d, want 3 naming %s as still bad\n%s\n%s", code, name, out, errOut)
			}
			if !strings.Contains(errOut, "dsdelta replay: not everything merged: 0 files pending, 1 quarantined") {
				t.Fatalf("replay does not say why it exits 3:\n%s", errOut)
			}
		})
	}
	t.Run("replay exits 0 once the quarantined file is gone from the source", func(t *testing.T) {
		if err := os.Remove(filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := cli(t, "replay", "--source", src, "--lake", lake); code != 0 || !strings.Contains(out, "0 still quarantined") {
			t.Fatalf("replay = %d, want 0\n%s\n%s", code, out, errOut)
		}
		if out, errOut, code := cli(t, "run", "--source", src, "--lake", lake); code != 0 {
			t.Fatalf("run = %d, want 0 as replay\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("a bad configuration exits 2, as it does for run", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(bad, []byte("batch_max_files: -1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := cli(t, "replay", "--source", src, "--lake", lake, "--config", bad); code != 2 {
			t.Fatalf("replay = %d, want 2\n%s\n%s", code, out, errOut)
		}
	})
}
