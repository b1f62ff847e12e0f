package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// order is a row of dbo.orders.
type order struct {
	id   int
	item string
}

func (o order) payload() string { return fmt.Sprintf(`{"id":%d,"item":%q}`, o.id, o.item) }

// Two SQL Server databases, each streamed to its own root path, both with
// dbo.orders (and one key in common).
var (
	salesOrders = []order{{1, "sales-1"}, {2, "sales-2"}}
	hrOrders    = []order{{2, "hr-2"}, {3, "hr-3"}}
)

// sqlServerFile renders SQL Server CDC inserts into dbo.orders of the
// database db, in the layout Datastream writes under the stream's root
// path prefix, with LSNs from lsn on.
func sqlServerFile(prefix, db, name string, lsn int, orders ...order) dssim.File {
	var b strings.Builder
	for i, o := range orders {
		fmt.Fprintf(&b, `{"uuid":"u-%s-%d","read_timestamp":"2026-01-05T10:00:00.000Z","source_timestamp":"2026-01-05T10:00:%02d.000Z","object":"dbo_orders","read_method":"sqlserver-cdc","stream_name":"projects/1/locations/l/streams/%s",`+
			`"source_metadata":{"schema":"dbo","table":"orders","database":"%s","lsn":"00000025:%08X:0003","tx_id":"0x%X","primary_keys":["id"],"change_type":"INSERT","is_deleted":false},"payload":%s}`+"\n",
			name, i, i%60, db, db, lsn+i, lsn+i, o.payload())
	}
	return dssim.File{Name: prefix + "dbo_orders/2026/01/05/10/00/" + name + "_sqlserver-cdc_1_0_0.jsonl", Data: []byte(b.String())}
}

// buckets serves each bucket name from its own store, as the cloud does.
type buckets map[string]objstore.Store

func (b buckets) Bucket(_ context.Context, name string) (objstore.Store, error) {
	s, ok := b[name]
	if !ok {
		return nil, fmt.Errorf("no bucket %q", name)
	}
	return s, nil
}

// inBucket writes files to a bucket and returns their notifications.
func inBucket(t *testing.T, ctx context.Context, store objstore.Store, bucket string, files ...dssim.File) []datastream.SourceFile {
	t.Helper()
	notes := write(t, ctx, store, files)
	for i := range notes {
		notes[i].Bucket = bucket
	}
	return notes
}

// stagedOf lists the objects in the staging area that belong to a file.
func stagedOf(t *testing.T, ctx context.Context, lake objstore.Store, f datastream.SourceFile) []string {
	t.Helper()
	id := coord.FileID(f.Bucket, f.Name, f.Generation)
	var out []string
	for _, name := range listAll(t, ctx, lake, "_staging/") {
		if strings.Contains(name, id) {
			out = append(out, name)
		}
	}
	return out
}

// stageOne stages a file and fails the test on a transient error.
func stageOne(t *testing.T, ctx context.Context, p *Pipeline, f datastream.SourceFile) StageResult {
	t.Helper()
	res, err := p.Stage(ctx, f)
	if err != nil {
		t.Fatalf("stage %s: %v", f.Name, err)
	}
	return res
}

// mergeOne merges a table and fails the test on an error.
func mergeOne(t *testing.T, ctx context.Context, p *Pipeline, tableID string) {
	t.Helper()
	if _, err := p.MergeTable(ctx, tableID); err != nil {
		t.Fatalf("merge %s: %v", tableID, err)
	}
}

// checkOrders checks that a table holds exactly the orders given.
func checkOrders(t *testing.T, ctx context.Context, p *Pipeline, tableID string, orders []order) {
	t.Helper()
	_, rows := stateRows(t, ctx, p, tableID, "id")
	want := map[string]string{}
	for _, o := range orders {
		want[fmt.Sprintf(`{"id":%d}`, o.id)] = o.payload()
	}
	if !maps.Equal(rows, want) {
		t.Errorf("%s holds %v, want %v", tableID, rows, want)
	}
}

// keptApart stages the sales and the hr file, expecting the tables
// salesID and hrID, merges both and checks each holds its own orders.
func keptApart(t *testing.T, ctx context.Context, p *Pipeline, notes []datastream.SourceFile, salesID, hrID string) {
	t.Helper()
	for i, want := range []string{salesID, hrID} {
		if res := stageOne(t, ctx, p, notes[i]); res.Quarantined != "" || res.Table != want {
			t.Fatalf("%s: %+v, want it staged for %s", notes[i].Name, res, want)
		}
		mergeOne(t, ctx, p, want)
	}
	checkOrders(t, ctx, p, salesID, salesOrders)
	checkOrders(t, ctx, p, hrID, hrOrders)
}

func TestTwoStreamsWithTheSameTableInTheCloud(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T, cfg config.Config) (*Pipeline, objstore.Store, []datastream.SourceFile) {
		t.Helper()
		ds := objstore.NewMemory()
		p := newPipeline(t, ds, cfg)
		p.Sources = buckets{"ds": ds}
		notes := inBucket(t, ctx, ds, "ds",
			sqlServerFile("datastream/sales-db/", "sales", "a", 10, salesOrders...),
			sqlServerFile("datastream/hr-db/", "hr", "b", 10, hrOrders...))
		return p, ds, notes
	}

	t.Run("without a mapping the second stream's file is quarantined, naming both prefixes, and nothing of it is staged", func(t *testing.T) {
		p, _, notes := setup(t, config.Config{})
		if res := stageOne(t, ctx, p, notes[0]); res.Quarantined != "" || res.Table != "dbo.orders" {
			t.Fatalf("the first stream's file: %+v", res)
		}
		mergeOne(t, ctx, p, "dbo.orders")
		_, before := stateSnapshot(t, ctx, p, "dbo.orders")

		res := stageOne(t, ctx, p, notes[1])
		for _, want := range []string{`"datastream/sales-db/"`, `"datastream/hr-db/"`, "dbo.orders", notes[1].Name} {
			if !strings.Contains(res.Quarantined, want) {
				t.Errorf("reason %q does not name %s", res.Quarantined, want)
			}
		}
		if staged := stagedOf(t, ctx, p.Lake, notes[1]); len(staged) > 0 {
			t.Errorf("staged for the quarantined file: %v", staged)
		}
		u, err := p.Unmerged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(u) != 1 || u[0].Table != "dbo.orders" || len(u[0].Pending) != 0 || len(u[0].Quarantined) != 1 || u[0].Quarantined[0].Name != notes[1].Name {
			t.Fatalf("Unmerged = %+v, want the second stream's file quarantined under dbo.orders", u)
		}
		mergeOne(t, ctx, p, "dbo.orders")
		if _, after := stateSnapshot(t, ctx, p, "dbo.orders"); after.Version() != before.Version() {
			t.Errorf("dbo.orders went from version %d to %d", before.Version(), after.Version())
		}
		checkOrders(t, ctx, p, "dbo.orders", salesOrders)

		// Staged again (a re-delivery), it is refused again.
		if res := stageOne(t, ctx, p, notes[1]); res.Quarantined == "" {
			t.Fatalf("staged again: %+v, want it quarantined", res)
		}
		// The first stream goes on feeding its table.
		more := inBucket(t, ctx, p.Sources.(buckets)["ds"], "ds", sqlServerFile("datastream/sales-db/", "sales", "c", 20, order{4, "sales-4"}))
		if res := stageOne(t, ctx, p, more[0]); res.Quarantined != "" {
			t.Fatalf("the first stream's next file: %+v", res)
		}
	})

	t.Run("with a mapping each stream has its table under its namespace, with its own rows", func(t *testing.T) {
		p, _, notes := setup(t, config.Config{Sources: []config.Source{
			{Prefix: "datastream/sales-db/", Namespace: "sales"},
			{Prefix: "datastream/hr-db", Namespace: "hr"},
		}})
		keptApart(t, ctx, p, notes, "sales.dbo.orders", "hr.dbo.orders")
		tables := deltaTables(t, ctx, p.Lake)
		if want := []string{"hr/dbo/orders", "hr/dbo/orders_log", "hr/dbo/orders_tombstones", "sales/dbo/orders", "sales/dbo/orders_log", "sales/dbo/orders_tombstones"}; !slices.Equal(tables, want) {
			t.Errorf("Delta tables in the lake: %v, want %v", tables, want)
		}
	})

	t.Run("sqlserver_table_id: database names each table by its database", func(t *testing.T) {
		p, _, notes := setup(t, config.Config{SQLServerTableID: config.SQLServerDatabase})
		keptApart(t, ctx, p, notes, "sales_dbo.orders", "hr_dbo.orders")
	})

	t.Run("the same prefix in two buckets is two streams", func(t *testing.T) {
		one, two := objstore.NewMemory(), objstore.NewMemory()
		p := newPipeline(t, one, config.Config{})
		p.Sources = buckets{"one": one, "two": two}
		a := inBucket(t, ctx, one, "one", sqlServerFile("datastream/", "sales", "a", 10, salesOrders...))
		b := inBucket(t, ctx, two, "two", sqlServerFile("datastream/", "hr", "b", 10, hrOrders...))
		if res := stageOne(t, ctx, p, a[0]); res.Quarantined != "" {
			t.Fatalf("%+v", res)
		}
		res := stageOne(t, ctx, p, b[0])
		if !strings.Contains(res.Quarantined, "bucket one") || !strings.Contains(res.Quarantined, "bucket two") {
			t.Fatalf("reason %q, want both buckets named", res.Quarantined)
		}
	})

	t.Run("files of two streams staged at once agree on one stream", func(t *testing.T) {
		p, _, notes := setup(t, config.Config{})
		results := make([]StageResult, len(notes))
		var wg sync.WaitGroup
		for i, n := range notes {
			wg.Go(func() { results[i] = stageOne(t, ctx, p, n) })
		}
		wg.Wait()
		won := slices.IndexFunc(results, func(r StageResult) bool { return r.Quarantined == "" })
		if won < 0 || results[1-won].Quarantined == "" {
			t.Fatalf("results %+v, want exactly one file quarantined", results)
		}
		mergeOne(t, ctx, p, "dbo.orders")
		checkOrders(t, ctx, p, "dbo.orders", [][]order{salesOrders, hrOrders}[won])
	})

	t.Run("a mapping added after a refusal lets the file be replayed into its namespace", func(t *testing.T) {
		p, _, notes := setup(t, config.Config{})
		stageOne(t, ctx, p, notes[0])
		if res := stageOne(t, ctx, p, notes[1]); res.Quarantined == "" {
			t.Fatalf("%+v, want it quarantined", res)
		}
		p.Config = config.Config{Sources: []config.Source{{Prefix: "datastream/hr-db/", Namespace: "hr"}}}
		if res := stageOne(t, ctx, p, notes[1]); res.Quarantined != "" || res.Table != "hr.dbo.orders" {
			t.Fatalf("replayed: %+v, want it staged for hr.dbo.orders", res)
		}
		mergeOne(t, ctx, p, "dbo.orders")
		mergeOne(t, ctx, p, "hr.dbo.orders")
		checkOrders(t, ctx, p, "dbo.orders", salesOrders)
		checkOrders(t, ctx, p, "hr.dbo.orders", hrOrders)
	})

	t.Run("a table the configuration excludes is skipped, not claimed", func(t *testing.T) {
		p, _, notes := setup(t, config.Config{Exclude: []string{"dbo.*"}})
		for _, n := range notes {
			if res := stageOne(t, ctx, p, n); res.Skipped == "" || res.Quarantined != "" {
				t.Fatalf("%s: %+v, want it skipped", n.Name, res)
			}
		}
	})
}

func TestTwoStreamFoldersInAnEmbeddedRun(t *testing.T) {
	ctx := context.Background()
	sales := sqlServerFile("sales-db/", "sales", "a", 10, salesOrders...)
	hr := sqlServerFile("hr-db/", "hr", "b", 10, hrOrders...)

	t.Run("without a mapping the second stream's file is quarantined and the first table keeps its rows", func(t *testing.T) {
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{})
		write(t, ctx, source, []dssim.File{sales})
		if res, err := p.RunOnce(ctx, RunOptions{Source: source, Parallel: 2}); err != nil || !slices.Equal(res.Merged, []string{"dbo.orders"}) {
			t.Fatalf("first pass: %+v %v", res, err)
		}
		_, before := stateSnapshot(t, ctx, p, "dbo.orders")
		notes := write(t, ctx, source, []dssim.File{hr})
		res, err := p.RunOnce(ctx, RunOptions{Source: source, Parallel: 2})
		if err != nil {
			t.Fatal(err)
		}
		if tr := res.Tables["dbo.orders"]; tr == nil || tr.StagedFiles != 0 || tr.MergedFiles != 0 || tr.StateVersion != before.Version() {
			t.Fatalf("second pass: dbo.orders %+v, want nothing staged or merged and version %d", tr, before.Version())
		}
		u, err := p.Unmerged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(u) != 1 || u[0].Table != "dbo.orders" || len(u[0].Quarantined) != 1 || u[0].Quarantined[0].Name != hr.Name {
			t.Fatalf("Unmerged = %+v, want the hr-db file quarantined under dbo.orders", u)
		}
		if reason := u[0].Quarantined[0].Reason; !strings.Contains(reason, `"sales-db/"`) || !strings.Contains(reason, `"hr-db/"`) || !strings.Contains(reason, "dbo.orders") {
			t.Errorf("reason %q does not name the table and both prefixes", reason)
		}
		if staged := stagedOf(t, ctx, p.Lake, notes[0]); len(staged) > 0 {
			t.Errorf("staged for the quarantined file: %v", staged)
		}
		checkOrders(t, ctx, p, "dbo.orders", salesOrders)
	})

	t.Run("with a mapping one pass keeps the two tables apart", func(t *testing.T) {
		source := objstore.NewMemory()
		p := newPipeline(t, source, config.Config{Sources: []config.Source{{Prefix: "sales-db", Namespace: "sales"}, {Prefix: "hr-db", Namespace: "hr"}}})
		write(t, ctx, source, []dssim.File{sales, hr})
		res, err := p.RunOnce(ctx, RunOptions{Source: source, Parallel: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Merged, []string{"hr.dbo.orders", "sales.dbo.orders"}) {
			t.Fatalf("merged %v, want both namespaced tables", res.Merged)
		}
		if u, err := p.Unmerged(ctx); err != nil || len(u) != 0 {
			t.Fatalf("Unmerged = %+v %v, want nothing", u, err)
		}
		checkOrders(t, ctx, p, "sales.dbo.orders", salesOrders)
		checkOrders(t, ctx, p, "hr.dbo.orders", hrOrders)
	})
}

func TestANamespaceAndADatabaseOfTheSameNameAreRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("a table without a namespace whose database is a namespace", func(t *testing.T) {
		ds := objstore.NewMemory()
		p := newPipeline(t, ds, config.Config{Sources: []config.Source{{Prefix: "hr-db/", Namespace: "dbo"}}})
		notes := write(t, ctx, ds, []dssim.File{sqlServerFile("sales-db/", "sales", "a", 10, salesOrders...)})
		res := stageOne(t, ctx, p, notes[0])
		if !strings.Contains(res.Quarantined, "namespace dbo") || len(stagedOf(t, ctx, p.Lake, notes[0])) > 0 {
			t.Fatalf("%+v, want it quarantined for the namespace dbo, with nothing staged", res)
		}
	})
	t.Run("a table with a namespace inside a table without one", func(t *testing.T) {
		ds := objstore.NewMemory()
		p := newPipeline(t, ds, config.Config{})
		// MySQL's hr.dbo staged before the namespace hr was configured.
		f := jsonlFile("a", 1, `{"id":1}`)
		f.Data = []byte(strings.ReplaceAll(string(f.Data), `"database":"shop","table":"t"`, `"database":"hr","table":"dbo"`))
		notes := write(t, ctx, ds, []dssim.File{f})
		if res := stageOne(t, ctx, p, notes[0]); res.Quarantined != "" || res.Table != "hr.dbo" {
			t.Fatalf("%+v", res)
		}
		mergeOne(t, ctx, p, "hr.dbo")
		p.Config = config.Config{Sources: []config.Source{{Prefix: "hr-db/", Namespace: "hr"}}}
		notes = write(t, ctx, ds, []dssim.File{sqlServerFile("hr-db/", "hr", "b", 10, hrOrders...)})
		if res := stageOne(t, ctx, p, notes[0]); !strings.Contains(res.Quarantined, "inside the table hr.dbo") {
			t.Fatalf("%+v, want it quarantined as inside hr.dbo", res)
		}
	})
}

// deltaTables lists the folders of the lake that hold a Delta log.
func deltaTables(t *testing.T, ctx context.Context, lake objstore.Store) []string {
	t.Helper()
	var out []string
	for _, name := range listAll(t, ctx, lake, "") {
		if dir, _, ok := strings.Cut(name, "/_delta_log/"); ok && !slices.Contains(out, dir) {
			out = append(out, dir)
		}
	}
	slices.Sort(out)
	return out
}
