package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
)

// copyStore copies every object of src into a new memory store, skipping
// names for which skip returns true.
func copyStore(t testing.TB, src objstore.Store, skip func(name string) bool) *objstore.Bucket {
	t.Helper()
	dst := objstore.NewMemory()
	err := src.List(context.Background(), "", "", func(info objstore.Info) error {
		if skip != nil && skip(info.Name) {
			return nil
		}
		_, err := dst.Write(context.Background(), info.Name, bytes.NewReader(readAll(t, src, info.Name)), objstore.WriteOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// commitsUpTo returns a skip function dropping JSON commits ≤ v.
func commitsUpTo(v int64) func(string) bool {
	return func(name string) bool {
		lf, ok := parseLogName(objstore.Info{Name: name})
		return ok && lf.kind == kindCommit && lf.version <= v
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{Now: clock.Now})
	snap := createTable(t, tbl, []string{"dt"}, map[string]string{"delta.checkpointInterval": "100", "owner": "me"})
	day1, day2 := strp("2026-01-01"), strp("2026-01-02")
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("dt=2026-01-01/a.parquet", 3, map[string]*string{"dt": day1}),
		dataFile("dt=2026-01-02/b.parquet", 4, map[string]*string{"dt": day2}),
		dataFile("dt=__HIVE_DEFAULT_PARTITION__/c.parquet", 5, map[string]*string{"dt": nil}))
	tx.SetTxn("app-1", 7)
	snap, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	a := snap.Files()[0]
	tx = snap.NewTransaction(Operation{Name: "DELETE"})
	tx.ReadFiles(a.Path)
	tx.Remove(a.Remove(clock.Now().UnixMilli(), true))
	tx.Add(dataFile("dt=2026-01-01/a2.parquet", 2, map[string]*string{"dt": day1}))
	if snap, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := snap.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}

	fromCheckpointOnly := copyStore(t, store, commitsUpTo(snap.Version()))
	got := mustSnapshot(t, Open(fromCheckpointOnly))
	if got.CheckpointVersion() != snap.Version() {
		t.Fatalf("loaded checkpoint version %d, want %d", got.CheckpointVersion(), snap.Version())
	}
	sameSnapshot(t, got, snap)
	if n, _ := got.NumRecords(); n != 11 {
		t.Errorf("records = %d, want 11", n)
	}
	if ts := got.Tombstones(); len(ts) != 1 || ts[0].Path != a.Path || ts[0].Size == nil || *ts[0].Size != a.Size || *ts[0].PartitionValues["dt"] != "2026-01-01" {
		t.Errorf("tombstones = %+v, want the removed file with size and partition values", ts)
	}
	if c := got.Metadata().CreatedTime; c == nil || *c != *snap.Metadata().CreatedTime {
		t.Errorf("createdTime lost: %v", c)
	}

	var lc lastCheckpoint
	if err := json.Unmarshal(readAll(t, store, lastCheckpointName), &lc); err != nil {
		t.Fatal(err)
	}
	if lc.Version != snap.Version() || lc.Size != 7 || lc.NumOfAddFiles == nil || *lc.NumOfAddFiles != 3 || lc.SizeInBytes == nil || *lc.SizeInBytes == 0 {
		t.Errorf("_last_checkpoint = %+v, want version %d, 7 actions, 3 adds", lc, snap.Version())
	}

	t.Run("every checkpoint row has exactly one non-null action column", func(t *testing.T) {
		b := readAll(t, store, checkpointName(snap.Version()))
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		cols := f.Schema().Columns()
		rows := f.RowGroups()[0].Rows()
		defer rows.Close()
		buf := make([]parquet.Row, 16)
		n, _ := rows.ReadRows(buf)
		if n != 7 {
			t.Fatalf("rows = %d, want 7", n)
		}
		for _, row := range buf[:n] {
			set := map[string]bool{}
			row.Range(func(ci int, vs []parquet.Value) bool {
				for _, v := range vs {
					if !v.IsNull() {
						set[cols[ci][0]] = true
					}
				}
				return true
			})
			if len(set) != 1 {
				t.Errorf("row has non-null columns %v, want exactly one", set)
			}
		}
	})
}

func TestCheckpointOfSparkTableWithDeletionVectorsReadsBack(t *testing.T) {
	ctx := context.Background()
	src := mustSnapshot(t, Open(fixtureStore(t, "table-with-dv-small")))
	store := copyStore(t, fixtureStore(t, "table-with-dv-small"), nil)
	snap := mustSnapshot(t, Open(store))
	if err := snap.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	got := mustSnapshot(t, Open(copyStore(t, store, commitsUpTo(snap.Version()))))
	sameSnapshot(t, got, src)
	gdv, wdv := got.Files()[0].DeletionVector, src.Files()[0].DeletionVector
	if gdv == nil || *gdv != *wdv && (gdv.PathOrInlineDv != wdv.PathOrInlineDv || gdv.Cardinality != wdv.Cardinality || gdv.SizeInBytes != wdv.SizeInBytes) {
		t.Errorf("deletion vector = %+v, want %+v", gdv, wdv)
	}
	if p := got.Protocol(); strings.Join(p.ReaderFeatures, ",") != "deletionVectors,columnMapping" {
		t.Errorf("reader features = %v", p.ReaderFeatures)
	}
}

func TestCommitCheckpointsEveryInterval(t *testing.T) {
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), nil, map[string]string{"delta.checkpointInterval": "3"})
	for i := range 7 {
		snap = appendFiles(t, snap, "f"+string(rune('a'+i))+".parquet")
	}
	for _, v := range []int64{3, 6} {
		if ok, _ := exists(context.Background(), store, checkpointName(v)); !ok {
			t.Errorf("checkpoint %d missing", v)
		}
	}
	for _, v := range []int64{1, 2, 4, 5, 7} {
		if ok, _ := exists(context.Background(), store, checkpointName(v)); ok {
			t.Errorf("unexpected checkpoint %d", v)
		}
	}
	s := mustSnapshot(t, Open(store))
	if s.Version() != 7 || s.CheckpointVersion() != 6 || len(s.Files()) != 7 {
		t.Errorf("snapshot v%d from checkpoint %d with %d files; want v7, checkpoint 6, 7 files", s.Version(), s.CheckpointVersion(), len(s.Files()))
	}
}

func TestCheckpointDropsExpiredTombstones(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{Now: clock.Now})
	snap := createTable(t, tbl, nil, map[string]string{"delta.deletedFileRetentionDuration": "interval 2 days"})
	snap = appendFiles(t, snap, "old.parquet", "new.parquet", "live.parquet")
	remove := func(path string) {
		for _, f := range snap.Files() {
			if f.Path == path {
				tx := snap.NewTransaction(Operation{Name: "DELETE"})
				tx.Remove(f.Remove(clock.Now().UnixMilli(), true))
				var err error
				if snap, err = tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	remove("old.parquet")
	clock.Advance(3 * 24 * time.Hour)
	remove("new.parquet")
	if err := snap.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	got := mustSnapshot(t, Open(copyStore(t, store, commitsUpTo(snap.Version()))))
	ts := got.Tombstones()
	if len(ts) != 1 || ts[0].Path != "new.parquet" {
		t.Fatalf("tombstones = %v, want only new.parquet (old.parquet expired after 2 days)", ts)
	}
}

func TestLastCheckpointNeverMovesBackwards(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), nil, nil)
	old := appendFiles(t, snap, "a.parquet")
	newer := appendFiles(t, old, "b.parquet")
	if err := newer.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	lc, ok := Open(store).readLastCheckpoint(ctx)
	if !ok || lc.Version != newer.Version() {
		t.Fatalf("_last_checkpoint = %+v, want version %d", lc, newer.Version())
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	rows := []cpRow{
		{Protocol: &cpProtocol{MinReaderVersion: ptr(int32(1)), MinWriterVersion: ptr(int32(2))}},
		{Add: &cpAdd{Path: ptr("a.parquet"), PartitionValues: map[string]*string{"dt": nil}, Size: ptr(int64(1)), DataChange: ptr(false)}},
	}
	b, err := encodeCheckpoint(rows)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// testdata/fuzz/FuzzDecodeCheckpoint holds inputs that made parquet-go
	// allocate gigabytes or loop until memory ran out (see
	// TestCorruptParquetRootCausesFailFast and
	// TestCompressedPagesCannotAllocatePastTheirDeclaredSize). The fuzzer
	// has no time or memory limit per input: ckWithin makes one that spins
	// or allocates more than ckMaxAllocBytes a failure, saved, instead of a
	// run that never ends or a machine out of memory.
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ckWithin(t, func() error { return decodeCheckpoint(b, func(*Action) {}) })
	})
}

func TestDecodeCheckpointRejectsGarbage(t *testing.T) {
	if err := decodeCheckpoint([]byte("PAR1 not really PAR1"), func(*Action) {}); err == nil {
		t.Fatal("garbage decoded without an error")
	}
}

func TestACorruptCheckpointIsACorruptLogThatKeepsItsCause(t *testing.T) {
	var syntax *json.SyntaxError
	for _, tc := range []struct {
		name, file, content string
		cause               func(error) bool
	}{
		{"a Parquet checkpoint that is not Parquet is corrupt Parquet too",
			"_delta_log/00000000000000000003.checkpoint.parquet", "PAR1 not really PAR1",
			func(err error) bool { return errors.Is(err, parquetfile.ErrCorrupt) }},
		{"a JSON checkpoint line that is not JSON carries the syntax error",
			"_delta_log/00000000000000000003.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json", `{"add":`,
			func(err error) bool { return errors.As(err, &syntax) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			store.objects[tc.file] = []byte(tc.content)
			err := readCheckpointFile(context.Background(), store, objstore.Info{Name: tc.file, Size: int64(len(tc.content))}, func(*Action) {})
			if !errors.Is(err, ErrCorruptLog) || !tc.cause(err) || !strings.Contains(err.Error(), tc.file) {
				t.Fatalf("err = %v, want ErrCorruptLog naming %s and keeping its cause", err, tc.file)
			}
		})
	}
}

func TestTxnsExpireOnlyWithSetTransactionRetentionDuration(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		conf    map[string]string
		expired bool
	}{
		{"without the property a txn never expires", nil, false},
		{"with a one-day retention a week-old txn is forgotten", map[string]string{"delta.setTransactionRetentionDuration": "interval 1 day"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			store := objstore.NewMemory()
			tbl := OpenWith(store, Options{Now: clock.Now})
			snap := createTable(t, tbl, nil, tt.conf)
			tx := snap.NewTransaction(Operation{Name: "STREAMING UPDATE"})
			tx.SetTxn("app", 3)
			tx.Add(dataFile("a.parquet", 1, nil))
			snap, err := tx.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			clock.Advance(7 * 24 * time.Hour)
			if err := snap.WriteCheckpoint(ctx); err != nil {
				t.Fatal(err)
			}
			fresh := mustSnapshot(t, OpenWith(copyStore(t, store, commitsUpTo(snap.Version())), Options{Now: clock.Now}))
			for _, s := range []*Snapshot{snap, fresh} {
				_, ok := s.TxnVersion("app")
				if ok == tt.expired || (len(s.Txns()) == 0) != tt.expired {
					t.Errorf("txn present = %v, want %v", ok, !tt.expired)
				}
			}
		})
	}
}
