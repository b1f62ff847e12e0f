package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/dsdelta/dsdelta/internal/fixture"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// usersFixture is a real Datastream file from ../shared/fixtures.
func usersFixture(t *testing.T) string {
	t.Helper()
	return fixture.Path(t, "datastream", "GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-to-spanner", "src", "test", "resources", "DataStreamToSpannerEventsIT", "mysql-cdc-Users.avro")
}

func runDecode(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cmdDecode(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestDecodePrintsOneJSONObjectPerEvent(t *testing.T) {
	path := usersFixture(t)
	for name, arg := range map[string]string{"a local path": path, "a file:// URL through objstore": "file://" + filepath.ToSlash(path)} {
		t.Run("reading "+name, func(t *testing.T) {
			out, _, err := runDecode(t, arg, "--format", "jsonl")
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 4 {
				t.Fatalf("printed %d lines, want 4:\n%s", len(lines), out)
			}
			want := `{"table":"l1.Users","op":"upsert","key":{"id":3},"order":"mysql-bin.000014:60409","source_timestamp":"2024-05-09T06:56:54.000000Z","read_method":"cdc","change_type":"UPDATE-INSERT","row":{"id":3,"name":"Tester Gupta","age":50,"subscribed":0,"plan":"Z","startDate":"2023-06-07T00:00:00.000000Z"}}`
			if lines[3] != want {
				t.Errorf("last line\n got %s\nwant %s", lines[3], want)
			}
			for i, l := range lines {
				var m map[string]any
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("line %d is not JSON: %v", i+1, err)
				}
				for _, k := range []string{"table", "op", "key", "order", "source_timestamp", "read_method", "change_type", "row"} {
					if _, ok := m[k]; !ok {
						t.Errorf("line %d lacks %q", i+1, k)
					}
				}
			}
		})
	}
}

func TestDecodeJSONLinesWithKeyOverride(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.jsonl")
	line := `{"uuid":"u","read_timestamp":"2025-11-05T18:23:46.698000Z","source_timestamp":"2025-11-05T18:23:46.698000Z","object":"public_t","read_method":"postgresql-backfill","stream_name":"s","schema_key":"k","source_metadata":{"schema":"public","table":"t","is_deleted":false,"change_type":"INSERT","lsn":"","primary_keys":[]},"payload":{"a":1,"b":"x"}}`
	if err := os.WriteFile(p, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runDecode(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"key":null`) || !strings.Contains(out, `"order":"backfill"`) {
		t.Errorf("a table without primary keys does not print a null key:\n%s", out)
	}
	out, _, err = runDecode(t, "--pk", "public.t=b,a", p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"key":{"b":"x","a":1}`) {
		t.Errorf("the --pk override is not applied:\n%s", out)
	}
}

func TestDecodeReportsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"uuid":"u","source_timestamp":"2025-11-05T18:23:46Z","read_method":"postgresql-cdc","source_metadata":{"schema":"public","table":"t","lsn":"zz"},"payload":{}}`+"\n"), 0o644)
	tests := []struct {
		name    string
		args    []string
		usage   bool
		message string
	}{
		{"no file is a usage error", nil, true, ""},
		{"two files are a usage error", []string{"a", "b"}, true, ""},
		{"an unknown output format is a usage error", []string{"--format", "csv", bad}, true, ""},
		{"a malformed --pk is a usage error", []string{"--pk", "nodot=a", bad}, true, ""},
		{"a missing file names the file", []string{filepath.Join(dir, "nope.avro")}, false, "nope.avro"},
		{"a bad record names file, line, field and reason", []string{bad}, false, "bad.jsonl: line 1: record 1: field source_metadata.lsn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runDecode(t, tt.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, errUsage) != tt.usage {
				t.Errorf("err = %v, usage error %v, want %v", err, errors.Is(err, errUsage), tt.usage)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %v, want it to mention %q", err, tt.message)
			}
		})
	}
}

func TestDecodeTypesAJSONFileFromAllItsValues(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.jsonl")
	event := func(lsn, payload string) string {
		return `{"uuid":"u","read_timestamp":"2025-11-05T18:23:46.698000Z","source_timestamp":"2025-11-05T18:23:46.698000Z","object":"public_t","read_method":"postgresql-cdc","stream_name":"s","schema_key":"k","source_metadata":{"schema":"public","table":"t","is_deleted":false,"change_type":"INSERT","lsn":"` + lsn + `","primary_keys":["id"]},"payload":` + payload + `}`
	}
	data := event("0/1", `{"id":1,"n":null,"at":"2025-10-25 03:36:17.948151","mixed":1.50}`) + "\n" +
		event("0/2", `{"id":2,"n":5,"at":"2025-10-25T05:36:17.948151+02:00","mixed":"x"}`) + "\n"
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runDecode(t, p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		`"row":{"id":1,"n":null,"at":"2025-10-25T03:36:17.948151Z","mixed":"1.50"}}`,
		`"row":{"id":2,"n":5,"at":"2025-10-25T03:36:17.948151Z","mixed":"x"}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, l := range lines {
		if !strings.HasSuffix(l, want[i]) {
			t.Errorf("line %d\n got %s\nwant suffix %s", i+1, l, want[i])
		}
	}
}
