package delta

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// optSchema is the schema of the compaction tests' tables, partitioned by
// region: a key, the input file a row came from, and the partition.
var optSchema = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long},
	{Name: "file", Type: value.Long},
	{Name: "region", Type: value.String, Nullable: true},
}}

// optRow is one row of an optSchema table.
type optRow struct {
	id, file int64
	region   string
}

func compareOptRows(a, b optRow) int {
	return cmp.Or(cmp.Compare(a.region, b.region), cmp.Compare(a.id, b.id), cmp.Compare(a.file, b.file))
}

// optTable creates an empty optSchema table in memory.
func optTable(t *testing.T, ctx context.Context) objstore.Store {
	t.Helper()
	store := objstore.NewMemory()
	if _, err := Create(ctx, store, CreateOptions{Schema: optSchema, PartitionColumns: []string{"region"}}); err != nil {
		t.Fatal(err)
	}
	return store
}

// optAppend commits one data file of region holding the keys ids, in the
// order given, each row naming file.
func optAppend(t *testing.T, ctx context.Context, store objstore.Store, region string, file int64, ids ...int64) Add {
	t.Helper()
	var rows [][]any
	for _, id := range ids {
		rows = append(rows, []any{id, file, region})
	}
	return commitRows(t, ctx, store, WriteOptions{Schema: optSchema, PartitionColumns: []string{"region"}, PartitionValues: map[string]any{"region": region}, DataChange: true}, rows)
}

// optRead returns the rows of each file of the latest snapshot, in file
// order, and the snapshot.
func optRead(t *testing.T, ctx context.Context, store objstore.Store) (map[string][]optRow, *Snapshot) {
	t.Helper()
	raw, snap := readRows(t, ctx, store)
	out := map[string][]optRow{}
	for path, rows := range raw {
		for _, row := range rows {
			out[path] = append(out[path], optRow{row[0].(int64), row[1].(int64), row[2].(string)})
		}
	}
	return out, snap
}

// optAll is every row of files, sorted.
func optAll(files map[string][]optRow) []optRow {
	var all []optRow
	for _, rows := range files {
		all = append(all, rows...)
	}
	slices.SortFunc(all, compareOptRows)
	return all
}

// counts is r without its sizes and version, which tests that compare
// file counts do not know in advance.
func counts(r OptimizeResult) OptimizeResult {
	r.BytesRemoved, r.BytesAdded, r.Version = 0, 0, 0
	return r
}

func TestOptimizeDryRunReportsTheRewriteAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	store := optTable(t, ctx)
	var size int64
	for f := range int64(3) {
		size += optAppend(t, ctx, store, "eu", f, f, f+3).Size
	}
	snap := mustSnapshot(t, Open(store))
	dry, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := (OptimizeResult{FilesRemoved: 3, BytesRemoved: size}); dry != want {
		t.Fatalf("dry run = %+v, want %+v", dry, want)
	}
	if v := mustSnapshot(t, Open(store)).Version(); v != snap.Version() {
		t.Fatalf("a dry run committed version %d", v)
	}
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	after := mustSnapshot(t, Open(store))
	if res.FilesRemoved != 3 || res.BytesRemoved != size || res.FilesAdded != 1 || res.Version != snap.Version()+1 ||
		after.Version() != res.Version || res.BytesAdded != after.SizeBytes() {
		t.Fatalf("optimize = %+v; table at version %d with %d bytes", res, after.Version(), after.SizeBytes())
	}
}

func TestOptimizeCompactsTheSmallFilesOfEachPartitionClusteredByKey(t *testing.T) {
	ctx := context.Background()
	store := optTable(t, ctx)
	// Two partitions with three small files each, keys interleaving and
	// repeating across files; a partition with a lone small file.
	for f := range int64(3) {
		optAppend(t, ctx, store, "eu", f, f, f+3, f+6, 9)
		optAppend(t, ctx, store, "us", 10+f, 9-f, 12-f)
	}
	lone := optAppend(t, ctx, store, "ap", 20, 1, 2)
	before, snap := optRead(t, ctx, store)
	rank := map[int64]int{} // input file -> position in the snapshot
	for i, f := range snap.Files() {
		rank[before[f.Path][0].file] = i
	}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20, ClusterBy: []string{"id"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}

	after, snap2 := optRead(t, ctx, store)
	if counts(res) != (OptimizeResult{FilesRemoved: 6, FilesAdded: 2}) || snap2.NumFiles() != 3 {
		t.Fatalf("result %+v with %d files, want 6 files compacted into 2 beside the lone one", res, snap2.NumFiles())
	}
	if !slices.Equal(optAll(after), optAll(before)) {
		t.Fatalf("rows differ after compaction:\n got  %v\n want %v", optAll(after), optAll(before))
	}
	if _, ok := after[lone.Path]; !ok {
		t.Fatalf("the lone small file %s of its partition was rewritten", lone.Path)
	}
	for path, rows := range after {
		// Key order, ties in the order of the snapshot's files.
		if !slices.IsSortedFunc(rows, func(a, b optRow) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(rank[a.file], rank[b.file])) }) {
			t.Fatalf("file %s is not clustered by key with ties in file order: %v", path, rows)
		}
		if slices.ContainsFunc(rows, func(r optRow) bool { return r.region != rows[0].region }) {
			t.Fatalf("file %s mixes partitions: %v", path, rows)
		}
	}
	for _, f := range snap2.Files() {
		if f.Path != lone.Path && f.DataChange {
			t.Fatalf("compacted file %s has dataChange=true", f.Path)
		}
	}
	h, err := Open(store).History(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if h[0].Operation != "OPTIMIZE" || h[0].Metrics["numRemovedFiles"] != "6" || h[0].Metrics["numAddedFiles"] != "2" {
		t.Fatalf("commit %s %v, want OPTIMIZE of 6 files into 2", h[0].Operation, h[0].Metrics)
	}
	for _, r := range snap2.Tombstones() {
		if r.DataChange || r.DeletionTimestamp == nil || *r.DeletionTimestamp != now.UnixMilli() {
			t.Fatalf("remove %+v: want dataChange=false stamped with the clock given", r)
		}
	}
}

func TestOptimizeWithoutClusterColumnsConcatenatesTheFiles(t *testing.T) {
	ctx := context.Background()
	store := optTable(t, ctx)
	for f := range int64(3) {
		optAppend(t, ctx, store, "eu", f, 9-f, 3, 1+f)
	}
	before, snap := optRead(t, ctx, store)
	var want []optRow
	for _, f := range snap.Files() {
		want = append(want, before[f.Path]...)
	}
	if _, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	after, _ := optRead(t, ctx, store)
	if len(after) != 1 {
		t.Fatalf("%d files after compaction, want 1", len(after))
	}
	for _, rows := range after {
		if !slices.Equal(rows, want) {
			t.Fatalf("rows %v, want the files one after the other: %v", rows, want)
		}
	}
}

func TestOptimizeCommitsNothingWithoutTwoSmallFilesInAPartition(t *testing.T) {
	ctx := context.Background()
	store := optTable(t, ctx)
	big := optAppend(t, ctx, store, "eu", 0, 1, 2, 3)
	optAppend(t, ctx, store, "eu", 1, 4)
	optAppend(t, ctx, store, "us", 2, 5)
	_, snap := optRead(t, ctx, store)
	// The first file is not small: under a quarter of the target.
	target := 4 * big.Size
	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: target, ClusterBy: []string{"id"}})
	if err != nil || res != (OptimizeResult{}) {
		t.Fatalf("result %+v, error %v; want nothing done", res, err)
	}
	if _, after := optRead(t, ctx, store); after.Version() != snap.Version() {
		t.Fatalf("version %d -> %d, want no commit", snap.Version(), after.Version())
	}
}

func TestOptimizeRejectsAnUnknownClusterColumn(t *testing.T) {
	ctx := context.Background()
	store := optTable(t, ctx)
	optAppend(t, ctx, store, "eu", 0, 1)
	optAppend(t, ctx, store, "eu", 1, 2)
	_, snap := optRead(t, ctx, store)
	_, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 20, ClusterBy: []string{"nope"}})
	if !errors.Is(err, ErrUnknownColumn) {
		t.Fatalf("error %v, want %v", err, ErrUnknownColumn)
	}
}

func TestOptimizeOfManyMoreSmallFilesThanTheFanInReadsAtMostFanInAtOnce(t *testing.T) {
	ctx := context.Background()
	mem := optTable(t, ctx)
	n := 3*DefaultMergeFanIn + 5
	for f := range int64(n) {
		optAppend(t, ctx, mem, "eu", f, f%7, 100+f, 1000) // 1000 in every file
	}
	before, _ := optRead(t, ctx, mem)
	store := &kmOpenReaders{Store: mem}
	snap, err := Open(store).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rank := map[int64]int{} // input file -> position in the snapshot
	for i, f := range snap.Files() {
		rank[before[f.Path][0].file] = i
	}

	res, err := snap.Optimize(ctx, OptimizeOptions{TargetFileBytes: 1 << 30, ClusterBy: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}

	if peak := store.maxOpen(); peak > DefaultMergeFanIn {
		t.Fatalf("%d data files were read at once, want at most %d", peak, DefaultMergeFanIn)
	}
	after, snap2 := optRead(t, ctx, mem)
	if counts(res) != (OptimizeResult{FilesRemoved: n, FilesAdded: 1}) || len(after) != 1 {
		t.Fatalf("result %+v with %d files, want %d files compacted into 1", res, len(after), n)
	}
	if !slices.Equal(optAll(after), optAll(before)) {
		t.Fatalf("rows differ after compaction:\n got  %v\n want %v", optAll(after), optAll(before))
	}
	for path, rows := range after {
		if !slices.IsSortedFunc(rows, func(a, b optRow) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(rank[a.file], rank[b.file])) }) {
			t.Fatalf("file %s is not clustered by key with ties in file order: %v", path, rows)
		}
	}
	// The intermediate files of the passes are gone: the store holds the
	// inputs (removed, for vacuum) and the output.
	if files := kmDataFiles(t, ctx, mem); len(files) != n+1 {
		t.Fatalf("%d data files in the store, want the %d inputs and the output", len(files), n)
	}
	if snap2.NumFiles() != 1 {
		t.Fatalf("%d files in the table, want 1", snap2.NumFiles())
	}
}
