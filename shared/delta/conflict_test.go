package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

func TestConcurrentBlindAppendsAllSucceed(t *testing.T) {
	const writers = 8
	for name, store := range stores(t) {
		t.Run("on the "+name+" store, every writer lands at its own contiguous version", func(t *testing.T) {
			base := createTable(t, Open(store), nil, map[string]string{"delta.checkpointInterval": "3"})
			var wg sync.WaitGroup
			versions := make([]int64, writers)
			errs := make([]error, writers)
			for i := range writers {
				wg.Go(func() {
					tx := base.NewTransaction(Operation{Name: "WRITE"})
					tx.Add(dataFile(fmt.Sprintf("w%d.parquet", i), 10, nil))
					s, err := tx.Commit(context.Background())
					errs[i] = err
					if err == nil {
						versions[i] = s.Version()
					}
				})
			}
			wg.Wait()
			seen := map[int64]bool{}
			for i := range writers {
				if errs[i] != nil {
					t.Fatalf("writer %d: %v", i, errs[i])
				}
				seen[versions[i]] = true
			}
			for v := int64(1); v <= writers; v++ {
				if !seen[v] {
					t.Errorf("no writer landed at version %d (got %v)", v, versions)
				}
			}
			s := mustSnapshot(t, Open(store))
			if s.Version() != writers || len(s.Files()) != writers {
				t.Fatalf("latest = v%d with %d files, want v%d with %d", s.Version(), len(s.Files()), writers, writers)
			}
		})
	}
}

func TestConcurrentRemovesOfTheSameFile(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	snap := appendFiles(t, createTable(t, Open(store), nil, nil), "a.parquet", "b.parquet")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			tx := snap.NewTransaction(Operation{Name: "DELETE"})
			tx.ReadFiles("a.parquet")
			tx.Remove(snap.Files()[0].Remove(1, true))
			tx.Add(dataFile(fmt.Sprintf("rewrite-%d.parquet", i), 5, nil))
			_, errs[i] = tx.Commit(ctx)
		})
	}
	wg.Wait()
	won, lost := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, ErrConflict) && errors.Is(err, ErrConcurrentDeleteDelete):
			lost++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("won %d, lost %d; want exactly one of each", won, lost)
	}
	if s := mustSnapshot(t, Open(store)); s.Version() != 2 || len(s.Files()) != 2 {
		t.Errorf("latest = v%d with %v", s.Version(), filePaths(s.Files()))
	}
}

func TestConcurrentTxnForTheSameAppIDConflicts(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), nil, nil)
	first := snap.NewTransaction(Operation{Name: "STREAMING UPDATE"})
	first.Add(dataFile("a.parquet", 1, nil))
	first.SetTxn("pipeline/orders", 1)
	second := snap.NewTransaction(Operation{Name: "STREAMING UPDATE"})
	second.Add(dataFile("b.parquet", 1, nil))
	second.SetTxn("pipeline/orders", 1)
	if _, err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := second.Commit(ctx)
	if !errors.Is(err, ErrConcurrentTxn) || !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConcurrentTxn", err)
	}
	t.Run("a transaction that only read the appId conflicts too", func(t *testing.T) {
		reader := snap.NewTransaction(Operation{Name: "WRITE"})
		if _, ok := reader.TxnVersion("pipeline/orders"); ok {
			t.Fatal("txn visible in the old snapshot")
		}
		reader.Add(dataFile("c.parquet", 1, nil))
		if _, err := reader.Commit(ctx); !errors.Is(err, ErrConcurrentTxn) {
			t.Fatalf("err = %v, want ErrConcurrentTxn", err)
		}
	})
	t.Run("another appId does not conflict", func(t *testing.T) {
		other := snap.NewTransaction(Operation{Name: "STREAMING UPDATE"})
		other.Add(dataFile("d.parquet", 1, nil))
		other.SetTxn("pipeline/customers", 1)
		s, err := other.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := s.TxnVersion("pipeline/orders"); v != 1 {
			t.Errorf("returned snapshot lost the winner's txn: %v", s.Txns())
		}
		if len(s.Files()) != 2 {
			t.Errorf("returned snapshot files = %v, want the winner's and ours", filePaths(s.Files()))
		}
	})
}

func TestCheckConflictsRules(t *testing.T) {
	blindAppend := &commitData{version: 5, info: &CommitInfo{IsBlindAppend: ptr(true)}, actions: []Action{{Add: &Add{Path: "w.parquet", DataChange: true}}}}
	nonBlindAdd := &commitData{version: 5, info: &CommitInfo{IsBlindAppend: ptr(false)}, actions: []Action{{Add: &Add{Path: "w.parquet", DataChange: true}}}}
	compaction := &commitData{version: 5, actions: []Action{
		{Remove: &Remove{Path: "a.parquet"}}, {Add: &Add{Path: "c.parquet", DataChange: false}},
	}}
	removeB := &commitData{version: 5, actions: []Action{{Remove: &Remove{Path: "b.parquet", DataChange: true}}}}
	metadata := &commitData{version: 5, actions: []Action{{MetaData: &Metadata{ID: "x"}}}}
	protocol := &commitData{version: 5, actions: []Action{{Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}}}}
	infoOnly := &commitData{version: 5, info: &CommitInfo{Operation: "VACUUM START"}}

	blind := func(tx *Transaction) { tx.Add(Add{Path: "mine.parquet", DataChange: true}) }
	readWhole := func(tx *Transaction) { tx.ReadWholeTable(); blind(tx) }
	readWholeSerializable := func(tx *Transaction) { readWhole(tx); tx.SetIsolationLevel(Serializable) }
	readA := func(tx *Transaction) { tx.ReadFiles("a.parquet"); blind(tx) }
	changeSchema := func(tx *Transaction) { tx.SetMetadata(Metadata{ID: "y"}) }

	tests := []struct {
		name   string
		ours   func(*Transaction)
		winner *commitData
		want   error // nil: no conflict
	}{
		{"a blind append never conflicts with a blind append", blind, blindAppend, nil},
		{"a blind append does not conflict with a compaction", blind, compaction, nil},
		{"a blind append does not conflict with a commitInfo-only commit", blind, infoOnly, nil},
		{"a metadata change by the winner conflicts", blind, metadata, ErrMetadataChanged},
		{"a protocol change by the winner conflicts", blind, protocol, ErrProtocolChanged},
		{"a whole-table read ignores a blind append under WriteSerializable", readWhole, blindAppend, nil},
		{"a whole-table read conflicts with a blind append under Serializable", readWholeSerializable, blindAppend, ErrConcurrentAppend},
		{"a whole-table read conflicts with a non-blind add", readWhole, nonBlindAdd, ErrConcurrentAppend},
		{"a whole-table read conflicts with any removal", readWhole, removeB, ErrConcurrentDeleteRead},
		{"reading a file that the winner removed conflicts", readA, compaction, ErrConcurrentDeleteRead},
		{"reading a file the winner did not touch does not conflict", readA, removeB, nil},
		{"changing the metadata conflicts with concurrent appends", changeSchema, blindAppend, ErrConcurrentAppend},
	}
	snap := createTable(t, Open(objstore.NewMemory()), nil, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx := snap.NewTransaction(Operation{Name: "TEST"})
			tt.ours(tx)
			err := tx.checkConflicts(tt.winner)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("conflict %v, want none", err)
			case tt.want != nil && (!errors.Is(err, tt.want) || !errors.Is(err, ErrConflict)):
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestLosingCommitCatchesUpWithAllWinnersAtOnce(t *testing.T) {
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{MaxCommitAttempts: 2})
	base := createTable(t, tbl, nil, nil)
	s := base
	for i := range 3 {
		s = appendFiles(t, s, fmt.Sprintf("other-%d.parquet", i))
	}
	tx := base.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("late.parquet", 1, nil))
	got, err := tx.Commit(context.Background())
	if err != nil || got.Version() != 4 || len(got.Files()) != 4 {
		t.Fatalf("commit = %v, %v; want version 4 with 4 files", got, err)
	}
}

// racingStore lets a rival blind append win every commit version just
// before our write of it.
type racingStore struct {
	objstore.Store
	rival int
}

func (r *racingStore) Write(ctx context.Context, name string, body io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	if opts.IfAbsent && strings.HasSuffix(name, ".json") {
		r.rival++
		rival := fmt.Sprintf(`{"commitInfo":{"timestamp":1,"isBlindAppend":true,"txnId":"rival-%d"}}
{"add":{"path":"rival-%d.parquet","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}
`, r.rival, r.rival)
		if _, err := r.Store.Write(ctx, name, strings.NewReader(rival), opts); err != nil {
			return objstore.Info{}, err
		}
	}
	return r.Store.Write(ctx, name, body, opts)
}

func TestCommitGivesUpAfterMaxAttempts(t *testing.T) {
	mem := objstore.NewMemory()
	base := createTable(t, Open(mem), nil, nil)
	tbl := OpenWith(&racingStore{Store: mem}, Options{MaxCommitAttempts: 3})
	snap, err := tbl.SnapshotAt(context.Background(), base.Version())
	if err != nil {
		t.Fatal(err)
	}
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("mine.parquet", 1, nil))
	_, err = tx.Commit(context.Background())
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "gave up after 3 attempts") {
		t.Fatalf("err = %v, want ErrConflict after 3 attempts", err)
	}
}
