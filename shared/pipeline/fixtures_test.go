package pipeline

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

var update = flag.Bool("update", false, "rewrite testdata/fixture_runs.golden")

// TestEveryFixtureDirectoryRuns runs each real Datastream fixture folder
// through Stage and MergeTable, checks every current-state table against a
// replay of the decoded events, and compares a summary (tables, rows,
// quarantined files) with testdata/fixture_runs.golden, reviewed by hand
// against ../shared/fixtures/datastream/INDEX.md.
func TestEveryFixtureDirectoryRuns(t *testing.T) {
	roots := map[string][]string{
		"FormatDatastreamRecordToJsonTest": {"GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-common", "src", "test", "resources", "FormatDatastreamRecordToJsonTest"},
		"badal-io events":                  {"badal-io__datastream-deltalake-connector", "spark", "src", "test", "resources", "events"},
		"badal-io tables":                  {"badal-io__datastream-deltalake-connector", "spark", "src", "test", "resources", "tables"},
	}
	spanner := fixture.Path(t, "datastream", "GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-to-spanner", "src", "test", "resources")
	entries, err := os.ReadDir(spanner)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			roots[e.Name()] = []string{"GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-to-spanner", "src", "test", "resources", e.Name()}
		}
	}
	names := make([]string, 0, len(roots))
	for n := range roots {
		names = append(names, n)
	}
	sort.Strings(names)
	// Deletion vectors change how rows leave the state, not what it holds:
	// both settings give the same summary, in the default batches (one per
	// table, mostly: the golden summary) and in batches of one file, where
	// later files change rows of earlier ones and vectors get written.
	type run struct {
		dv       config.Switch
		maxFiles int
	}
	summaries := map[run]string{}
	for _, r := range []run{{config.Off, 0}, {config.On, 0}, {config.Off, 1}, {config.On, 1}} {
		var summary bytes.Buffer
		vectors := 0
		for _, name := range names {
			dir := fixture.Path(t, append([]string{"datastream"}, roots[name]...)...)
			fmt.Fprintf(&summary, "== %s\n", name)
			vectors += runFixtureDir(t, dir, config.Config{BatchMaxFiles: r.maxFiles, Defaults: config.TableConfig{DeletionVectors: r.dv}}, &summary)
		}
		if (vectors > 0) != (r.dv == config.On && r.maxFiles == 1) {
			t.Errorf("deletion vectors %s, batches of %d files: %d written", r.dv, r.maxFiles, vectors)
		}
		summaries[r] = summary.String()
	}
	for _, maxFiles := range []int{0, 1} {
		if on, off := summaries[run{config.On, maxFiles}], summaries[run{config.Off, maxFiles}]; on != off {
			t.Fatalf("batches of %d files: the summary with deletion vectors on differs from off:\n on:\n%s\noff:\n%s", maxFiles, on, off)
		}
	}
	summary := bytes.NewBufferString(summaries[run{config.Off, 0}])
	golden := filepath.Join("testdata", "fixture_runs.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, summary.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != summary.String() {
		t.Fatalf("summary differs from %s:\n got:\n%s\nwant:\n%s", golden, summary.String(), want)
	}
}

func runFixtureDir(t *testing.T, dir string, cfg config.Config, summary io.Writer) (vectors int) {
	ctx := context.Background()
	src, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	lake := objstore.NewMemory()
	c, err := coord.NewLocal(lake, coord.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Pipeline{Lake: lake, Sources: oneSource{src}, Coordination: Coordinate(c), Holder: "fixtures",
		Config: cfg, dvMinFileBytes: -1}
	// Reference: every event decoded, replayed per (table, key).
	type ref struct {
		order []byte
		del   bool
	}
	want := map[string]map[string]ref{}
	var quarantined []string
	err = src.List(ctx, "", "", func(info objstore.Info) error {
		if !(config.Config{}).IsDataFile(info.Name) {
			return nil
		}
		res, err := p.Stage(ctx, datastream.SourceFile{Name: info.Name, Generation: info.Generation, Size: info.Size})
		if err != nil {
			return err
		}
		if res.Quarantined != "" {
			reason := res.Quarantined
			if i := strings.LastIndex(reason, ": "); i >= 0 {
				reason = reason[i+2:]
			}
			quarantined = append(quarantined, fmt.Sprintf("quarantined %s: %s", info.Name, reason))
			return nil
		}
		r, err := src.NewReader(ctx, info.Name, 0, -1)
		if err != nil {
			return err
		}
		defer r.Close()
		return datastream.All(ctx, r, info.Name, datastream.Options{}, func(ev datastream.Event) error {
			if ev.HistoryOnly {
				return nil
			}
			id := ev.Table.String()
			if want[id] == nil {
				want[id] = map[string]ref{}
			}
			k := cdc.KeyText(ev.KeyValues)
			if cur, ok := want[id][k]; !ok || bytes.Compare(ev.Order.Bytes, cur.order) > 0 {
				want[id][k] = ref{order: ev.Order.Bytes, del: ev.Op == datastream.OpDelete}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	tables, err := c.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].Table < tables[j].Table })
	for _, st := range tables {
		if st.Pending == 0 {
			continue
		}
		if _, err := p.MergeTable(ctx, st.Table); err != nil {
			t.Fatalf("%s: merge %s: %v", dir, st.Table, err)
		}
		tabs, _ := p.TableSet(st.Table)
		snap, err := delta.Open(tabs.State).Snapshot(ctx)
		if errors.Is(err, delta.ErrNotATable) {
			fmt.Fprintf(summary, "%s: history only\n", st.Table)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		key := strings.Split(snap.Configuration()[cdc.PropKey], ",")
		got := map[string][]byte{}
		for _, f := range snap.Files() {
			err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{Columns: append(append([]string(nil), key...), cdc.ColOrder)}, func(row []any) error {
				got[cdc.KeyText(row[:len(key)])] = row[len(key)].([]byte)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		live := 0
		for k, r := range want[st.Table] {
			if r.del {
				if _, ok := got[k]; ok {
					t.Errorf("%s %s: deleted key %s is in the current state", dir, st.Table, k)
				}
				continue
			}
			live++
			if !bytes.Equal(got[k], r.order) {
				t.Errorf("%s %s: key %s holds another event than the latest", dir, st.Table, k)
			}
		}
		if live != len(got) {
			t.Errorf("%s %s: %d rows, replay says %d", dir, st.Table, len(got), live)
		}
		if vr, err := cdc.Verify(ctx, tabs); err != nil || !vr.OK() {
			t.Errorf("%s %s: verify %v %+v", dir, st.Table, err, vr)
		}
		if cfg.Defaults.DeletionVectors != config.On && snap.Protocol().Supports(delta.FeatureDeletionVectors) {
			t.Errorf("%s %s: deletion vectors off, yet protocol %+v", dir, st.Table, snap.Protocol())
		}
		vectors += deletionVectorsAdded(t, ctx, tabs.State)
		fmt.Fprintf(summary, "%s: %d rows, key %v, version %d\n", st.Table, len(got), key, snap.Version())
	}
	sort.Strings(quarantined)
	for _, q := range quarantined {
		fmt.Fprintln(summary, q)
	}
	return vectors
}
