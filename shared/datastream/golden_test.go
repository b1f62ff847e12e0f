package datastream

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/value"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the decoder's output")

// fixtureFiles lists every data file under the Datastream fixtures.
func fixtureFiles(t *testing.T) (root string, files []string) {
	t.Helper()
	root = fixture.Path(t, "datastream")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, ".avro") || (strings.HasSuffix(name, ".json") && name != "schema.json") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 60 {
		t.Fatalf("found %d fixture files, want at least 60", len(files))
	}
	return root, files
}

// renderGolden decodes a file into the golden text, as `dsdelta decode`
// does (JSON events unified over the events decoded): the payload schema
// whenever it changes, then per event the `dsdelta decode` line and a line
// of metadata, and the error that ended decoding, if any.
func renderGolden(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []Event
	err = All(context.Background(), f, name, Options{}, func(ev Event) error {
		evs = append(evs, ev)
		return nil
	})
	if _, uerr := UnifyJSON(evs, value.StructType{}); uerr != nil {
		t.Fatalf("unify %s: %v", name, uerr)
	}
	var out bytes.Buffer
	lastSchema := ""
	for _, ev := range evs {
		if s := ev.Schema.String(); s != lastSchema {
			out.WriteString("schema " + s + "\n")
			lastSchema = s
		}
		line, err := ev.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(line)
		out.WriteByte('\n')
		m := ev.Meta
		out.WriteString("  meta record=" + itoa(m.Record) + " source=" + string(m.Source) +
			" uuid=" + m.UUID + " object=" + m.Object + " read_method=" + m.ReadMethod +
			" schema_key=" + m.SchemaKey + " is_deleted=" + boolText(m.IsDeleted) +
			" read_ts=" + m.ReadTimestamp.String() + " tx=" + m.Position.TxID +
			" order_bytes=" + hexText(ev.Order.Bytes) + "\n")
	}
	if err != nil {
		out.WriteString("error " + err.Error() + "\n")
	}
	return out.Bytes()
}

func TestDecodeFixturesMatchGoldenFiles(t *testing.T) {
	root, files := fixtureFiles(t)
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		t.Run(rel, func(t *testing.T) {
			got := renderGolden(t, p, filepath.ToSlash(rel))
			golden := filepath.Join("testdata", "golden", strings.ReplaceAll(filepath.ToSlash(rel), "/", "__")+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update to create it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("decoded %s differs from %s\n--- got\n%s\n--- want\n%s", rel, golden, got, want)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func hexText(b []byte) string { return hex.EncodeToString(b) }
