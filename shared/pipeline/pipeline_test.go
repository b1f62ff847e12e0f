package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

type oneSource struct{ s objstore.Store }

func (o oneSource) Bucket(context.Context, string) (objstore.Store, error) { return o.s, nil }

func newPipeline(t *testing.T, source objstore.Store, cfg config.Config) *Pipeline {
	t.Helper()
	lake := objstore.NewMemory()
	c, err := coord.NewLocal(lake, coord.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Small test files are copied to the history as large ones are.
	return &Pipeline{Lake: lake, Sources: oneSource{source}, Coordination: Coordinate(c), Config: cfg, Holder: "test", historyCopyEvents: 1}
}

// write puts simulated files in the source and returns their notifications
// (a re-delivered file gets a new generation, as a GCS rewrite does).
func write(t *testing.T, ctx context.Context, source objstore.Store, files []dssim.File) []datastream.SourceFile {
	t.Helper()
	var out []datastream.SourceFile
	for _, f := range files {
		info, err := source.Write(ctx, f.Name, bytes.NewReader(f.Data), objstore.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, datastream.SourceFile{Name: f.Name, Generation: info.Generation, Size: info.Size})
	}
	return out
}

// sourceJSON renders the source columns of a row (by name) as JSON, so rows
// typed from JSON inference (long) and from the simulator (integer) compare.
func sourceJSON(t *testing.T, schema value.StructType, row []any, cols []string) string {
	t.Helper()
	var st value.StructType
	var vals []any
	for _, c := range cols {
		i := schema.Index(c)
		if i < 0 {
			t.Fatalf("column %s missing from %s", c, schema)
		}
		st.Fields = append(st.Fields, schema.Fields[i])
		vals = append(vals, row[i])
	}
	b, err := value.AppendRowJSON(nil, st, vals)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkTables compares every table with the simulator's reference state and
// checks history holds each distinct event once.
func checkTables(t *testing.T, ctx context.Context, p *Pipeline, ref map[string]*dssim.Table) {
	t.Helper()
	for id, want := range ref {
		tabs, err := p.TableSet(id)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := delta.Open(tabs.State).Snapshot(ctx)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		cols := make([]string, len(want.Schema.Fields))
		for i, f := range want.Schema.Fields {
			cols[i] = f.Name
		}
		got := map[string]string{}
		// A soft_delete table also holds deleted keys, an scd2 table
		// past versions: the live rows equal the source, and verify
		// checks the rest.
		isDeleted, softDeleted := snap.Schema().Index(cdc.ColIsDeleted), 0
		isCurrent, past := snap.Schema().Index(cdc.ColIsCurrent), 0
		for _, f := range snap.Files() {
			err := delta.ReadFile(ctx, tabs.State, snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
				if isDeleted >= 0 && row[isDeleted] == true {
					softDeleted++
					return nil
				}
				if isCurrent >= 0 && row[isCurrent] == false {
					past++
					return nil
				}
				j := sourceJSON(t, snap.Schema(), row, cols)
				key := sourceJSON(t, snap.Schema(), row, want.Key)
				if _, dup := got[key]; dup {
					t.Fatalf("%s: key %s twice", id, key)
				}
				got[key] = j
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		keyIdx := make([]int, len(want.Key))
		for i, k := range want.Key {
			keyIdx[i] = want.Schema.Index(k)
		}
		for _, row := range want.Rows {
			k := make([]any, len(keyIdx))
			for i, ki := range keyIdx {
				k[i] = row[ki]
			}
			kst := value.StructType{}
			for _, ki := range keyIdx {
				kst.Fields = append(kst.Fields, want.Schema.Fields[ki])
			}
			kj, _ := value.AppendRowJSON(nil, kst, k)
			w := sourceJSON(t, want.Schema, row, cols)
			if got[string(kj)] != w {
				t.Fatalf("%s: key %s:\n got  %s\n want %s", id, kj, got[string(kj)], w)
			}
			delete(got, string(kj))
		}
		if len(got) > 0 {
			t.Fatalf("%s: %d rows the source does not hold, e.g. %v", id, len(got), got)
		}
		if mode := cdc.TableMode(snap); mode != cdc.Mode(p.Config.Table(id).Mode) {
			t.Fatalf("%s: table mode %s, configured %s", id, mode, p.Config.Table(id).Mode)
		}
		if cdc.TableMode(snap) == cdc.ModeSoftDelete && want.Deletes > 0 && softDeleted == 0 {
			t.Fatalf("%s: the source deleted rows and the soft_delete table marks none deleted", id)
		}
		if cdc.TableMode(snap) == cdc.ModeSCD2 && want.Events > len(want.Rows) && past == 0 {
			t.Fatalf("%s: the source changed rows and the scd2 table holds no past version", id)
		}
		// History: every distinct event exactly once.
		hs, err := delta.Open(tabs.History).Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		cols = append(append([]string(nil), want.Key...), cdc.ColOrder)
		for _, f := range hs.Files() {
			err := delta.ReadFile(ctx, tabs.History, hs.Metadata(), f, delta.ReadOptions{Columns: cols}, func(row []any) error {
				k := fmt.Sprint(row)
				if seen[k] {
					t.Fatalf("%s: history holds event %s twice", id, k)
				}
				seen[k] = true
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) != want.Events {
			t.Fatalf("%s: history holds %d distinct events, the source emitted %d", id, len(seen), want.Events)
		}
		vr, err := cdc.Verify(ctx, tabs)
		if err != nil || !vr.OK() {
			t.Fatalf("%s: verify: %v %+v", id, err, vr)
		}
	}
}

// TestPipelineConvergesToTheSource runs simulated workloads through Stage
// and MergeTable with shuffled, duplicated and re-delivered files, merges
// interleaved with staging at random, and random batch sizes.
func TestPipelineConvergesToTheSource(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 5; seed++ {
		formats := []dssim.Format{dssim.JSONL, dssim.Avro, dssim.JSONLGz}
		f := formats[int(seed)%3]
		// The seeds take turns at the table modes.
		mode := tableModes[seed%3]
		t.Run(fmt.Sprintf("seed %d (%s, mode %s) equals the source", seed, f, mode), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			sim, err := dssim.Run(dssim.Options{
				Seed: seed, EventsPerFile: 5 + rng.IntN(30), DuplicateEvents: 0.1, RedeliveredFiles: 0.15, Shuffle: true,
				Tables: []dssim.TableSpec{
					{Source: dssim.MySQL, Database: "shop", Table: "customers", Format: f, InitialRows: 10, Changes: 80},
					{Source: dssim.Oracle, Database: "HR", Table: "EMPLOYEES", Format: formats[(int(seed)+1)%3], InitialRows: 8, Changes: 60},
					{Source: dssim.PostgreSQL, Database: "public", Table: "order_lines", Format: formats[(int(seed)+2)%3], InitialRows: 5, Changes: 70},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			source := objstore.NewMemory()
			p := newPipeline(t, source, config.Config{BatchMaxFiles: 1 + rng.IntN(6), Defaults: config.TableConfig{Mode: mode}})
			notes := write(t, ctx, source, sim.Files)
			// Duplicate notifications of the same generation, too.
			for i := 0; i < 5; i++ {
				notes = append(notes, notes[rng.IntN(len(notes))])
			}
			rng.Shuffle(len(notes), func(i, j int) { notes[i], notes[j] = notes[j], notes[i] })
			for i, n := range notes {
				res, err := p.Stage(ctx, n)
				if err != nil {
					t.Fatal(err)
				}
				if res.Quarantined != "" || res.Skipped != "" {
					t.Fatalf("%s: %+v", n.Name, res)
				}
				if rng.IntN(4) == 0 || i == len(notes)-1 {
					for id := range sim.Tables {
						if _, err := p.MergeTable(ctx, id); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			checkTables(t, ctx, p, sim.Tables)
			// Maintenance keeps every table equal.
			for id := range sim.Tables {
				if _, err := p.Maintain(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			checkTables(t, ctx, p, sim.Tables)
		})
	}
}

func TestBadFilesAreQuarantinedAndOthersGoOn(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 3, Tables: []dssim.TableSpec{{Source: dssim.MySQL, Database: "shop", Table: "c", InitialRows: 5, Changes: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	bad := []dssim.File{
		{Name: "shop_c/2026/01/05/10/00/x_mysql-cdc-binlog_1_0_0.jsonl", Data: []byte("{\"uuid\":\"a\",\n not json\n")},
		{Name: "shop_c/2026/01/05/10/00/y_mysql-cdc-binlog_1_0_0.avro", Data: []byte("Obj\x01garbage")},
	}
	good := write(t, ctx, source, sim.Files)
	badNotes := write(t, ctx, source, bad)
	for _, n := range append(badNotes, good...) {
		res, err := p.Stage(ctx, n)
		if err != nil {
			t.Fatalf("%s: a bad file must not be a transient error: %v", n.Name, err)
		}
		isBad := strings.Contains(n.Name, "/x_") || strings.Contains(n.Name, "/y_")
		if isBad != (res.Quarantined != "") {
			t.Fatalf("%s: quarantined=%q", n.Name, res.Quarantined)
		}
		if isBad && !strings.Contains(res.Quarantined, n.Name) {
			t.Fatalf("reason %q does not name the file", res.Quarantined)
		}
	}
	if _, err := p.MergeTable(ctx, "shop.c"); err != nil {
		t.Fatal(err)
	}
	checkTables(t, ctx, p, sim.Tables)
	// Staging the same bad file again quarantines it again, without error.
	if res, err := p.Stage(ctx, badNotes[0]); err != nil || res.Quarantined == "" {
		t.Fatalf("re-stage of a quarantined file: %+v %v", res, err)
	}
}

func TestTablePathsAreValidated(t *testing.T) {
	p := newPipeline(t, objstore.NewMemory(), config.Config{})
	for _, bad := range []string{"../x.y", "a/b.c", "a.b/../../c", "nodot", "a.b.c.d", "..", "a..c", "_staging.b.c", ""} {
		if _, err := p.TableSet(bad); err == nil {
			t.Errorf("TableSet(%q) accepted", bad)
		}
	}
	tabs, err := p.TableSet("shop.customers")
	if err != nil || !strings.HasSuffix(tabs.History.URL(), "shop/customers_log") {
		t.Fatalf("%v %v", tabs, err)
	}
	// A table of a stream with a namespace is in the namespace's folder.
	tabs, err = p.TableSet("sales.dbo.orders")
	if err != nil || !strings.HasSuffix(tabs.State.URL(), "sales/dbo/orders") || !strings.HasSuffix(tabs.Tombstones.URL(), "sales/dbo/orders_tombstones") || tabs.ID != "sales.dbo.orders" {
		t.Fatalf("%v %v", tabs, err)
	}
}

func TestTableSetBesideNamesTheSiblingsOfTheCurrentStateTable(t *testing.T) {
	dir := objstore.Sub(objstore.NewMemory(), "lake/shop")
	tabs := TableSetBeside(dir, "customers", "shop.customers")
	for what, got := range map[string]string{"state": tabs.State.URL(), "history": tabs.History.URL(), "tombstones": tabs.Tombstones.URL()} {
		want := map[string]string{"state": "lake/shop/customers", "history": "lake/shop/customers_log", "tombstones": "lake/shop/customers_tombstones"}[what]
		if !strings.HasSuffix(got, want) {
			t.Errorf("%s = %s, want it to end in %s", what, got, want)
		}
	}
	if tabs.ID != "shop.customers" {
		t.Errorf("ID = %q", tabs.ID)
	}
	// TableSetIn places a table id's tables the same way, in the folder of
	// its database.
	lake := objstore.NewMemory()
	in, err := TableSetIn(lake, "shop.customers")
	beside := TableSetBeside(objstore.Sub(lake, "shop"), "customers", "shop.customers")
	if err != nil || in.State.URL() != beside.State.URL() || in.History.URL() != beside.History.URL() || in.Tombstones.URL() != beside.Tombstones.URL() {
		t.Errorf("TableSetIn = %+v, %v; want the tables TableSetBeside names in the database's folder: %+v", in, err, beside)
	}
}
