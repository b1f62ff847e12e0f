package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/gcp"
)

func TestFinalizeNotificationParsesAsTheObjectItAnnounces(t *testing.T) {
	attrs := &storage.ObjectAttrs{
		Bucket: "datastream", Name: "shop_customers/2026/01/05/10/00/abc_mysql-cdc-binlog_1_0_0.jsonl",
		Generation: 1795973197630774, Size: 4242, ContentType: "application/octet-stream",
		Created: time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC), Updated: time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC),
	}
	msg, err := finalizeNotification(attrs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		attrs map[string]string
		data  []byte
	}{
		{"attributes and JSON_API_V1 body", msg.Attributes, msg.Data},
		{"body alone, as with attributes lost", map[string]string{"eventType": "OBJECT_FINALIZE"}, msg.Data},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := datastream.ParsePubSubNotification(tc.attrs, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if f.Bucket != attrs.Bucket || f.Name != attrs.Name || f.Generation != attrs.Generation || f.Size != attrs.Size {
				t.Errorf("parsed %+v, want bucket %s name %s generation %d size %d", f, attrs.Bucket, attrs.Name, attrs.Generation, attrs.Size)
			}
			if reason, skip := datastream.Skip(f); skip {
				t.Errorf("a finalized data file is skipped: %s", reason)
			}
		})
	}
}

func TestPrefixWriterPrefixesEveryLine(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"one line", []string{"hello\n"}, "[f] hello\n"},
		{"two lines in one write", []string{"a\nb\n"}, "[f] a\n[f] b\n"},
		{"a line split across writes", []string{"par", "tial\n", "next\n"}, "[f] partial\n[f] next\n"},
		{"an unfinished last line", []string{"a\nb"}, "[f] a\n[f] b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := &prefixWriter{prefix: "[f] ", w: &buf}
			for _, s := range tc.writes {
				n, err := w.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if buf.String() != tc.want {
				t.Errorf("got %q, want %q", buf.String(), tc.want)
			}
		})
	}
}

func TestMissingToolsAreNamed(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GOBIN", "")
	// No Go bin folder nor tools folder holds fake-gcs-server, and no Go
	// toolchain is on PATH to build it.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GOPATH", t.TempDir())
	t.Setenv("DSDELTA_TOOLS_DIR", t.TempDir())
	err := CheckTools()
	if !errors.Is(err, ErrMissingTool) {
		t.Fatalf("CheckTools with an empty PATH = %v, want ErrMissingTool", err)
	}
	for _, tool := range []string{"gcloud", "java", "fake-gcs-server"} {
		if !strings.Contains(err.Error(), tool) {
			t.Errorf("error does not name %s: %v", tool, err)
		}
	}
	if _, err := Start(context.Background(), Options{}); !errors.Is(err, ErrMissingTool) {
		t.Errorf("Start without the tools = %v, want ErrMissingTool", err)
	}
}

func TestRunRejectsBadUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"an unknown flag", []string{"--no-such-flag"}},
		{"a stray argument", []string{"extra"}},
		{"a malformed duration", []string{"--tick", "soon"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if !errors.Is(err, errUsage) {
				t.Errorf("run(%q) = %v, want a usage error", tc.args, err)
			}
		})
	}
}

func TestFunctionEnvComesLastSoItOverridesTheStacks(t *testing.T) {
	s := &Stack{opts: Options{Project: "p", LogLevel: "info", FunctionEnv: []string{"GOMEMLIMIT=409MiB", "DSDELTA_LOG_LEVEL=debug"}}}
	// A process takes the last value of a variable listed twice.
	last := map[string]string{}
	for _, kv := range s.functionEnv(FuncMerge, 8080) {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	if last["GOMEMLIMIT"] != "409MiB" || last["DSDELTA_LOG_LEVEL"] != "debug" || last["FUNCTION_TARGET"] != FuncMerge {
		t.Errorf("GOMEMLIMIT=%q DSDELTA_LOG_LEVEL=%q FUNCTION_TARGET=%q, want 409MiB, debug (FunctionEnv wins) and %s",
			last["GOMEMLIMIT"], last["DSDELTA_LOG_LEVEL"], last["FUNCTION_TARGET"], FuncMerge)
	}
}

func TestRunRefusesABadConfigFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file, text string
		want             []string // what the error must name
	}{
		{"an unknown key", "typo.yaml", "batch_max_files: 2\nbatch_max_filez: 3\n", []string{"typo.yaml", "batch_max_filez"}},
		{"an unknown key in a table", "table.json", `{"tables": {"shop.customers": {"mode": "current", "modes": "scd2"}}}`, []string{"table.json", "modes"}},
		{"a bad value", "negative.yaml", "batch_max_files: -1\n", []string{"negative.yaml", "batch_max_files"}},
		{"a missing file", "absent.yaml", "", []string{"absent.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, tc.file)
			if tc.text != "" {
				if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// With no PATH, a run that got past the flags would fail
			// with ErrMissingTool instead of starting a stack.
			t.Setenv("PATH", t.TempDir())
			var out, errOut bytes.Buffer
			err := run(context.Background(), []string{"--config", file}, &out, &errOut)
			if !errors.Is(err, errUsage) {
				t.Fatalf("run --config %s = %v, want a usage error", tc.file, err)
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %s: %v", w, err)
				}
			}
		})
	}
}

func TestConfigFileReachesTheFunctionsAsTheyReadIt(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dsdelta.yaml")
	text := "batch_max_files: 3\ntables:\n  shop.customers:\n    mode: scd2\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := readConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Config: cfg}
	o.defaults()
	s := &Stack{opts: o}
	for _, kv := range s.functionEnv(FuncCompact, 8080) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	env, err := gcp.EnvFromOS()
	if err != nil {
		t.Fatal(err)
	}
	if env.Config.BatchMaxFiles != 3 || env.Config.Table("shop.customers").Mode != config.ModeSCD2 {
		t.Errorf("the function read batch_max_files %d and mode %q, want 3 and scd2", env.Config.BatchMaxFiles, env.Config.Table("shop.customers").Mode)
	}
}

func TestEveryFunctionIsToldTheReconcileTopic(t *testing.T) {
	s := &Stack{opts: Options{Project: "p"}}
	for _, target := range []string{FuncOnFile, FuncMerge, FuncCompact} {
		if env := s.functionEnv(target, 8080); !slices.Contains(env, "DSDELTA_RECONCILE_TOPIC="+TopicReconcile) {
			t.Errorf("%s's environment %q lacks DSDELTA_RECONCILE_TOPIC=%s", target, env, TopicReconcile)
		}
	}
}

func TestStartRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"a drop share above 1", Options{DropNotifications: 1.5}, "DropNotifications"},
		{"a negative drop share", Options{DropNotifications: -0.1}, "DropNotifications"},
		{"a configuration with an unknown key", Options{Config: "batch_max_filez: 3\n"}, "batch_max_filez"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Refused before the tools are looked for: with no PATH, a
			// stack that got that far fails with ErrMissingTool instead.
			t.Setenv("PATH", t.TempDir())
			_, err := Start(t.Context(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
