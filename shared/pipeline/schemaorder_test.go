package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// jsonEvent is one MySQL CDC record of shop.t: its payload and whether it
// is a delete.
type jsonEvent struct {
	payload string
	delete  bool
}

// jsonlEvents renders events of shop.t at log positions pos, pos+1...
func jsonlEvents(name string, pos int, events ...jsonEvent) dssim.File {
	var b strings.Builder
	for i, e := range events {
		ct, del := "UPDATE", false
		if e.delete {
			ct, del = "DELETE", true
		}
		fmt.Fprintf(&b, `{"uuid":"u-%s-%d","read_timestamp":"2026-01-05T10:00:00.000Z","source_timestamp":"2026-01-05T10:00:%02d.000Z","object":"shop_t","read_method":"mysql-cdc-binlog",`+
			`"source_metadata":{"database":"shop","table":"t","primary_keys":["id"],"log_file":"mysql-bin.000001","log_position":%d,"change_type":%q,"is_deleted":%t},"payload":%s}`+"\n",
			name, i, (pos+i)%60, pos+i, ct, del, e.payload)
	}
	return dssim.File{Name: "shop_t/2026/01/05/10/00/" + name + "_mysql-cdc-binlog_1_0_0.jsonl", Data: []byte(b.String())}
}

func upsert(payload string) jsonEvent { return jsonEvent{payload: payload} }

// The scenario of a source schema change seen out of order: the table
// starts with columns id,a,b,c; file B (positions 20-21) drops c and adds
// d; file A (positions 10-13) was written before B in the old schema but
// reaches the merge after it.
var (
	schemaBase = jsonlEvents("base", 1,
		upsert(`{"id":1,"a":1,"b":"one","c":10}`),
		upsert(`{"id":2,"a":2,"b":"two","c":20}`),
		upsert(`{"id":3,"a":3,"b":"three","c":30}`))
	schemaB = jsonlEvents("b", 20,
		upsert(`{"id":1,"a":11,"b":"one+","d":"x1"}`),
		upsert(`{"id":4,"a":4,"b":"four","d":"x4"}`))
	schemaA = jsonlEvents("a", 10,
		upsert(`{"id":1,"a":100,"b":"older than B","c":11}`),
		upsert(`{"id":2,"a":22,"b":"two+","c":21}`),
		jsonEvent{payload: `{"id":3,"a":3,"b":"three","c":30}`, delete: true},
		upsert(`{"id":5,"a":5,"b":"five","c":50}`))

	// wantNewSchema is B's schema, which the table must end with.
	wantNewSchema = "struct<id:long,a:long,b:string,d:string>"
	// wantRows are the rows after base, B and A whatever their order:
	// A's rows applied where newer per key, with d null.
	wantRows = map[string]string{
		`{"id":1}`: `{"id":1,"a":11,"b":"one+","d":"x1"}`,
		`{"id":2}`: `{"id":2,"a":22,"b":"two+","d":null}`,
		`{"id":4}`: `{"id":4,"a":4,"b":"four","d":"x4"}`,
		`{"id":5}`: `{"id":5,"a":5,"b":"five","d":null}`,
	}
)

func overwriteConfig(t *testing.T) config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("defaults:\n  schema_mode: overwrite\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// tableModes are the table modes the schema-order scenarios run in.
var tableModes = []config.Mode{config.ModeCurrent, config.ModeSoftDelete, config.ModeSCD2}

// overwriteConfigIn is overwriteConfig with the table mode mode.
func overwriteConfigIn(t *testing.T, mode config.Mode) config.Config {
	cfg := overwriteConfig(t)
	cfg.Defaults.Mode = mode
	return cfg
}

// softDeletedRow is, in mode soft_delete, the row the scenario's deleted
// key 3 keeps: its last upsert in the table's schema.
const softDeletedRow = `{"id":3,"a":3,"b":"three","d":null}`

// checkConverged asserts the table holds B's schema, the expected rows,
// history in B's schema with every event once, and passes verify.
func checkConverged(t *testing.T, ctx context.Context, p *Pipeline) {
	t.Helper()
	schema, rows := stateRows(t, ctx, p, "shop.t", "id")
	if schema.String() != wantNewSchema {
		t.Errorf("state schema %s, want %s", schema, wantNewSchema)
	}
	want := wantRows
	if p.Config.Table("shop.t").Mode == config.ModeSoftDelete {
		want = maps.Clone(wantRows)
		want[`{"id":3}`] = softDeletedRow
		if d := deletedKeys(t, ctx, p, "shop.t", "id"); len(d) != 1 || !d[`{"id":3}`] {
			t.Errorf("deleted keys %v, want only id 3", d)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("state has %d rows, want %d: %v", len(rows), len(want), rows)
	}
	for k, w := range want {
		if rows[k] != w {
			t.Errorf("row %s = %s, want %s", k, rows[k], w)
		}
	}
	tabs, err := p.TableSet("shop.t")
	if err != nil {
		t.Fatal(err)
	}
	hsnap, err := delta.Open(tabs.History).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hs := cdc.SourceSchema(hsnap.Schema()); hs.String() != wantNewSchema {
		t.Errorf("history schema %s, want %s", hs, wantNewSchema)
	}
	if n := historyEvents(t, ctx, tabs.History); n != 9 {
		t.Errorf("history holds %d events, want 9", n)
	}
	if vr, err := cdc.Verify(ctx, tabs); err != nil || !vr.OK() {
		t.Errorf("verify: %v %+v", err, vr)
	}
}

func historyEvents(t *testing.T, ctx context.Context, store objstore.Store) int {
	t.Helper()
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range snap.Files() {
		if err := delta.ReadFile(ctx, store, snap.Metadata(), f, delta.ReadOptions{Columns: []string{cdc.ColOrder}}, func([]any) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// stageOnly stages files without merging.
func stageOnly(t *testing.T, ctx context.Context, p *Pipeline, source objstore.Store, files ...dssim.File) {
	t.Helper()
	for _, n := range write(t, ctx, source, files) {
		if res, err := p.Stage(ctx, n); err != nil || res.Quarantined != "" {
			t.Fatalf("stage %s: %+v %v", n.Name, res, err)
		}
	}
}

// TestSchemaModeOverwriteFollowsTheNewestChange: in schema mode
// "overwrite" the table's schema is the source's as of the newest change,
// whichever order the files arrive and batch in.
func TestSchemaModeOverwriteFollowsTheNewestChange(t *testing.T) {
	cases := []struct {
		name    string
		batches [][]dssim.File // staged together, then merged
		// schemas after each batch
		schemas []string
	}{
		{"files merged in source order change the schema each time",
			[][]dssim.File{{schemaBase}, {schemaA}, {schemaB}},
			[]string{"struct<id:long,a:long,b:string,c:long>", "struct<id:long,a:long,b:string,c:long>", wantNewSchema}},
		{"a late file of the old schema merged after the new one does not revert it",
			[][]dssim.File{{schemaBase}, {schemaB}, {schemaA}},
			[]string{"struct<id:long,a:long,b:string,c:long>", wantNewSchema, wantNewSchema}},
		{"a batch of the new file then the late old one takes the new schema",
			[][]dssim.File{{schemaBase}, {schemaB, schemaA}},
			[]string{"struct<id:long,a:long,b:string,c:long>", wantNewSchema}},
		{"a batch of the old file then the new one takes the new schema",
			[][]dssim.File{{schemaBase}, {schemaA, schemaB}},
			[]string{"struct<id:long,a:long,b:string,c:long>", wantNewSchema}},
		{"one batch of every file, the newest staged first, takes the new schema",
			[][]dssim.File{{schemaB, schemaBase, schemaA}},
			[]string{wantNewSchema}},
	}
	for _, mode := range tableModes {
		for _, tc := range cases {
			t.Run("mode "+string(mode)+": "+tc.name, func(t *testing.T) {
				ctx := context.Background()
				source := objstore.NewMemory()
				p := newPipeline(t, source, overwriteConfigIn(t, mode))
				for i, files := range tc.batches {
					stageOnly(t, ctx, p, source, files...)
					mr, err := p.MergeTable(ctx, "shop.t")
					if err != nil || mr.Batches != 1 || mr.Quarantined != 0 {
						t.Fatalf("merge %d: %+v %v", i, mr, err)
					}
					if schema, _ := stateRows(t, ctx, p, "shop.t", "id"); schema.String() != tc.schemas[i] {
						t.Fatalf("after batch %d the schema is %s, want %s", i, schema, tc.schemas[i])
					}
				}
				checkConverged(t, ctx, p)
			})
		}
	}
}

// TestSchemaModeOverwriteCrashAtEveryStepConverges kills the merge of the
// schema-changing file and of the late old file at each step, then
// restarts: the table converges to the newest change's schema and rows.
func TestSchemaModeOverwriteCrashAtEveryStepConverges(t *testing.T) {
	steps := []struct {
		name  string
		store func(name string) bool // writes that fail
		coord bool                   // CompleteBatch fails
	}{
		{"after data files, before the first commit", func(n string) bool { return strings.Contains(n, "_delta_log/") }, false},
		{"after the history commit", func(n string) bool {
			return strings.HasPrefix(n, "shop/t_tombstones/_delta_log/") || strings.HasPrefix(n, "shop/t/_delta_log/")
		}, false},
		{"after the tombstone commit", func(n string) bool { return strings.HasPrefix(n, "shop/t/_delta_log/") }, false},
		{"after every commit, before the registry update", func(string) bool { return false }, true},
	}
	orders := []struct {
		name    string
		first   dssim.File
		crashed dssim.File
	}{
		{"of the late old file", schemaB, schemaA},
		{"of the new file merged late", schemaA, schemaB},
	}
	for _, mode := range tableModes {
		for _, o := range orders {
			for _, step := range steps {
				t.Run("mode "+string(mode)+": a crash "+step.name+" in the merge "+o.name, func(t *testing.T) {
					ctx := context.Background()
					source := objstore.NewMemory()
					lake := &crashingStore{Store: objstore.NewMemory(), match: step.store}
					local, err := coord.NewLocal(lake.Store, coord.LocalOptions{})
					if err != nil {
						t.Fatal(err)
					}
					cc := &crashingBatches{Batches: local}
					p := &Pipeline{Lake: lake, Sources: oneSource{source}, Coordination: Coordinate(local), Config: overwriteConfigIn(t, mode), Holder: "crashy"}
					p.Batches = cc
					for _, f := range []dssim.File{schemaBase, o.first} {
						stageOnly(t, ctx, p, source, f)
						if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
							t.Fatal(err)
						}
					}
					stageOnly(t, ctx, p, source, o.crashed)
					lake.armed.Store(true)
					cc.armed.Store(step.coord)
					_, err = p.MergeTable(ctx, "shop.t")
					if !errors.Is(err, errCrash) {
						t.Fatalf("the crash did not happen: %v (store hits %d)", err, lake.hits.Load())
					}
					lake.armed.Store(false)
					cc.armed.Store(false)
					p2 := &Pipeline{Lake: lake.Store, Sources: oneSource{source}, Coordination: Coordinate(local), Config: p.Config, Holder: "restarted"}
					if res, err := p2.MergeTable(ctx, "shop.t"); err != nil || res.Busy || res.Batches != 1 {
						t.Fatalf("restart: %+v %v", res, err)
					}
					checkConverged(t, ctx, p2)
				})
			}
		}
	}
}

// failingStore fails every read: newestFile must not need the lake when
// the manifests carry their greatest order.
type failingStore struct{ objstore.Store }

func (failingStore) NewReader(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("read of a staged file")
}

func TestNewestFileUsesTheManifestsGreatestOrderAndAgreesWithTheStagedRows(t *testing.T) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: 21, EventsPerFile: 7, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 10, Changes: 60},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	files := write(t, ctx, source, sim.Files)
	// Staged in reverse, so the newest file is not the last one staged.
	for i := len(files) - 1; i >= 0; i-- {
		if _, err := p.Stage(ctx, files[i]); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := p.Registry.ListFiles(ctx, "shop.customers", coord.StateStaged)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 {
		t.Fatalf("%d staged files, want several", len(recs))
	}
	var withOrder, withoutOrder []stagedPart
	for _, r := range recs {
		m, err := p.readStaged(ctx, r.StagedPath)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.MaxOrder) == 0 {
			t.Fatalf("manifest %s has no max_order", r.StagedPath)
		}
		for _, part := range m.Parts {
			if len(part.MaxOrder) == 0 {
				t.Fatalf("a part of manifest %s has no max_order", r.StagedPath)
			}
			withOrder = append(withOrder, part)
			old := part
			old.MaxOrder = nil // as staged before manifests recorded it
			withoutOrder = append(withoutOrder, old)
		}
	}
	fromRows, err := p.newestPart(ctx, withoutOrder)
	if err != nil {
		t.Fatal(err)
	}
	lake := p.Lake
	p.Lake = failingStore{lake}
	fromManifests, err := p.newestPart(ctx, withOrder)
	p.Lake = lake
	if err != nil {
		t.Fatalf("newestPart read the lake although every manifest has max_order: %v", err)
	}
	if fromManifests != fromRows {
		t.Fatalf("newest part by manifests is %d (%s), by staged rows %d (%s)", fromManifests, withOrder[fromManifests].Add.Path, fromRows, withOrder[fromRows].Add.Path)
	}
	for _, part := range withOrder {
		if bytes.Compare(part.MaxOrder, withOrder[fromManifests].MaxOrder) > 0 {
			t.Fatalf("%s holds a greater order than the newest part %s", part.Add.Path, withOrder[fromManifests].Add.Path)
		}
	}
}

// TestChangingATablesModeIsRefusedUntilARebuild: a later configuration
// with another mode fails the merge before it writes anything, naming
// 'dsdelta rebuild --mode'; after the rebuild the merge goes on.
func TestChangingATablesModeIsRefusedUntilARebuild(t *testing.T) {
	ctx := context.Background()
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	stageOnly(t, ctx, p, source, schemaBase)
	if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
		t.Fatal(err)
	}
	tabs, err := p.TableSet("shop.t")
	if err != nil {
		t.Fatal(err)
	}
	versions := func() [3]int64 {
		var out [3]int64
		for i, s := range []objstore.Store{tabs.History, tabs.State, tabs.Tombstones} {
			snap, err := delta.Open(s).Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = snap.Version()
		}
		return out
	}
	before := versions()
	p.Config.Defaults.Mode = config.ModeSoftDelete
	stageOnly(t, ctx, p, source, schemaA)
	_, err = p.MergeTable(ctx, "shop.t")
	if !errors.Is(err, cdc.ErrModeMismatch) || !strings.Contains(err.Error(), "dsdelta rebuild --mode soft_delete") {
		t.Fatalf("merge after the mode changed: %v", err)
	}
	if after := versions(); after != before {
		t.Fatalf("the refused merge wrote: versions %v, then %v", before, after)
	}
	if vr, err := (cdc.Replay{Mode: cdc.ModeSoftDelete}).Rebuild(ctx, tabs); err != nil || !vr.OK() {
		t.Fatalf("rebuild --mode soft_delete: %v %+v", err, vr)
	}
	if _, err := p.MergeTable(ctx, "shop.t"); err != nil {
		t.Fatal(err)
	}
	if d := deletedKeys(t, ctx, p, "shop.t", "id"); len(d) != 1 || !d[`{"id":3}`] {
		t.Fatalf("deleted keys after the rebuild and the merge: %v", d)
	}
}
