package main

import (
	"strings"
	"testing"
)

func TestHelpVerbPrintsTheVerbsFlags(t *testing.T) {
	for name := range commands() {
		t.Run("help "+name+" prints the flags of "+name, func(t *testing.T) {
			out, errOut, code := cli(t, "help", name)
			if code != 0 || !strings.Contains(errOut, "\n  -") {
				t.Fatalf("help %s = %d, want 0 and its flags\n%s\n%s", name, code, out, errOut)
			}
		})
	}
	for _, tt := range []struct{ verb, flag string }{
		{"show", "-skip-missing"},
		{"simulate", "-fixed-dates"},
		{"optimize", "-dry-run"},
		{"vacuum", "-force"},
		{"checkpoint", "-dry-run"},
		{"expire-tombstones", "-retain string"},
		{"repair-stats", "-dry-run"},
	} {
		t.Run("help "+tt.verb+" explains "+tt.flag, func(t *testing.T) {
			if _, errOut, _ := cli(t, "help", tt.verb); !strings.Contains(errOut, "  "+tt.flag+"\n") {
				t.Fatalf("help %s does not explain %s:\n%s", tt.verb, tt.flag, errOut)
			}
		})
	}
	t.Run("help of an unknown command is a usage error", func(t *testing.T) {
		if out, errOut, code := cli(t, "help", "nope"); code != 2 || !strings.Contains(errOut, `unknown command "nope"`) {
			t.Fatalf("help nope = %d, want 2\n%s\n%s", code, out, errOut)
		}
	})
}

// TestUsageErrorsSayWhy: a command line a verb refuses exits 2 and says
// why on stderr, once; a flag the flag package refuses is explained by it.
func TestUsageErrorsSayWhy(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		why  string
	}{
		{[]string{"run"}, "dsdelta run: --source and --lake are required"},
		{[]string{"show", "--format", "xml", dir}, "dsdelta show: --format must be table or jsonl"},
		// A refused flag is told before the table is read: here there is none.
		{[]string{"optimize", "--max-deleted-share", "0", dir + "/missing"}, "dsdelta optimize: --max-deleted-share must be above 0 and at most 1"},
		{[]string{"vacuum", "--retain", "soon", dir + "/missing"}, `dsdelta vacuum: --retain "soon": want a positive duration`},
		{[]string{"run", "--bogus"}, "flag provided but not defined: -bogus"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, code := cli(t, tt.args...)
			if code != 2 || strings.Count(errOut, tt.why) != 1 {
				t.Fatalf("exit %d, want 2 and %q once on stderr\n%s\n%s", code, tt.why, out, errOut)
			}
		})
	}
}
