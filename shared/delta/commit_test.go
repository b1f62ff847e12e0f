package delta

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// stores returns a fresh memory store and a fresh local-directory store.
func stores(t *testing.T) map[string]objstore.Store {
	t.Helper()
	local, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]objstore.Store{"memory": objstore.NewMemory(), "local": local}
}

func TestCommitRoundTrip(t *testing.T) {
	for name, store := range stores(t) {
		t.Run("on the "+name+" store, returned snapshots equal reloaded ones", func(t *testing.T) {
			ctx := context.Background()
			tbl := Open(store)
			snap := createTable(t, tbl, nil, nil)
			snap = appendFiles(t, snap, "a.parquet", "b.parquet")
			sameSnapshot(t, mustSnapshot(t, tbl), snap)

			tx := snap.NewTransaction(Operation{Name: "UPDATE", Parameters: map[string]string{"predicate": `["id = 1"]`}})
			tx.ReadFiles("a.parquet")
			tx.Remove(snap.Files()[0].Remove(time.Now().UnixMilli(), true))
			tx.Add(dataFile("c.parquet", 9, nil))
			tx.SetMetrics(map[string]string{"numAddedFiles": "1", "numRemovedFiles": "1"})
			next, err := tx.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if next.Version() != 2 {
				t.Fatalf("version = %d, want 2", next.Version())
			}
			if got := strings.Join(filePaths(next.Files()), ","); got != "b.parquet,c.parquet" {
				t.Errorf("files = %s, want b.parquet,c.parquet", got)
			}
			reloaded := mustSnapshot(t, tbl)
			sameSnapshot(t, reloaded, next)
			if n, _ := reloaded.NumRecords(); n != 19 || reloaded.SizeBytes() != 110+109 {
				t.Errorf("records, bytes = %d, %d; want 19, 219", n, reloaded.SizeBytes())
			}
			if ts := reloaded.Tombstones(); len(ts) != 1 || ts[0].Path != "a.parquet" || !ts[0].ExtendedFileMetadata || ts[0].Size == nil {
				t.Errorf("tombstones = %+v, want a.parquet with extended metadata", ts)
			}

			c, err := parseCommit(2, readAll(t, store, commitName(2)))
			if err != nil {
				t.Fatal(err)
			}
			ci := c.info
			if ci == nil || ci.Operation != "UPDATE" || ci.ReadVersion == nil || *ci.ReadVersion != 1 || ci.IsBlindAppend == nil || *ci.IsBlindAppend ||
				ci.IsolationLevel != "WriteSerializable" || ci.TxnID != tx.TxnID() || ci.EngineInfo != "dsdelta/"+EngineVersion ||
				ci.OperationParameters["predicate"] != `["id = 1"]` || ci.OperationMetrics["numAddedFiles"] != "1" {
				t.Errorf("commitInfo = %+v", ci)
			}
		})
	}
}

func TestBlindAppendIsRecordedAsSuch(t *testing.T) {
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), nil, nil)
	appendFiles(t, snap, "a.parquet")
	c, err := parseCommit(1, readAll(t, store, commitName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.info.IsBlindAppend == nil || !*c.info.IsBlindAppend || c.info.OperationParameters["mode"] != "Append" {
		t.Errorf("commitInfo = %+v, want isBlindAppend true", c.info)
	}
}

func TestCommitValidity(t *testing.T) {
	day := strp("2026-01-01")
	withInvariant := testSchema()
	withInvariant.Fields[0].Metadata = map[string]any{"delta.invariants": `{"expression":{"expression":"id > 0"}}`}
	tests := []struct {
		name     string
		conf     map[string]string
		build    func(tx *Transaction, snap *Snapshot)
		sentinel error
		mention  string
	}{
		{"a file added twice is refused", nil, func(tx *Transaction, _ *Snapshot) {
			tx.Add(dataFile("x.parquet", 1, map[string]*string{"dt": day}), dataFile("x.parquet", 1, map[string]*string{"dt": day}))
		}, ErrInvalidCommit, "added twice"},
		{"a file removed twice is refused", nil, func(tx *Transaction, snap *Snapshot) {
			r := snap.Files()[0].Remove(1, true)
			tx.Remove(r, r)
		}, ErrInvalidCommit, "removed twice"},
		{"adding and removing the same file is refused", nil, func(tx *Transaction, snap *Snapshot) {
			f := snap.Files()[0]
			tx.Remove(f.Remove(1, true))
			tx.Add(f)
		}, ErrInvalidCommit, "both added and removed"},
		{"an add without a value for a partition column is refused", nil, func(tx *Transaction, _ *Snapshot) {
			tx.Add(dataFile("y.parquet", 1, nil))
		}, ErrInvalidCommit, `partition column "dt"`},
		{"an add with a value for a non-partition column is refused", nil, func(tx *Transaction, _ *Snapshot) {
			tx.Add(dataFile("y.parquet", 1, map[string]*string{"dt": day, "id": day}))
		}, ErrInvalidCommit, `"id"`},
		{"two txn actions for one appId are refused", nil, func(tx *Transaction, _ *Snapshot) {
			tx.SetTxn("app", 1)
			tx.SetTxn("app", 2)
		}, ErrInvalidCommit, "appId"},
		{"an add with a deletion vector is refused without the table feature", nil, func(tx *Transaction, _ *Snapshot) {
			a := dataFile("z.parquet", 1, map[string]*string{"dt": day})
			a.DeletionVector = &DeletionVector{StorageType: "i", PathOrInlineDv: "abc", SizeInBytes: 1, Cardinality: 1}
			tx.Add(a)
		}, ErrInvalidCommit, "deletionVectors"},
		{"removing data from an append-only table is refused", map[string]string{"delta.appendOnly": "true"}, func(tx *Transaction, snap *Snapshot) {
			tx.Remove(snap.Files()[0].Remove(1, true))
		}, ErrAppendOnly, "dataChange=true"},
		{"a protocol downgrade is refused", nil, func(tx *Transaction, _ *Snapshot) {
			tx.SetProtocol(Protocol{MinReaderVersion: 1, MinWriterVersion: 1})
		}, ErrInvalidCommit, "downgrade"},
		{"an upgrade to an unsupported writer version is refused", nil, func(tx *Transaction, _ *Snapshot) {
			tx.SetProtocol(Protocol{MinReaderVersion: 1, MinWriterVersion: 4})
		}, ErrUnsupportedFeature, "changeDataFeed"},
		{"metadata adding a column invariant is refused", nil, func(tx *Transaction, snap *Snapshot) {
			md := snap.Metadata()
			md.SchemaString = withInvariant.SchemaString()
			tx.SetMetadata(md)
		}, ErrUnsupportedFeature, "invariants (column id)"},
		{"metadata enabling change data feed is refused", nil, func(tx *Transaction, snap *Snapshot) {
			md := snap.Metadata()
			md.Configuration = map[string]string{"delta.enableChangeDataFeed": "true"}
			tx.SetMetadata(md)
		}, ErrUnsupportedFeature, "changeDataFeed"},
		{"metadata partitioning by an unknown column is refused", nil, func(tx *Transaction, snap *Snapshot) {
			md := snap.Metadata()
			md.PartitionColumns = []string{"nope"}
			tx.SetMetadata(md)
		}, ErrInvalidCommit, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := objstore.NewMemory()
			snap := createTable(t, Open(store), []string{"dt"}, tt.conf)
			tx := snap.NewTransaction(Operation{Name: "WRITE"})
			tx.Add(dataFile("dt=2026-01-01/a.parquet", 1, map[string]*string{"dt": day}))
			snap, err := tx.Commit(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tx = snap.NewTransaction(Operation{Name: "WRITE"})
			tt.build(tx, snap)
			_, err = tx.Commit(context.Background())
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tt.sentinel, tt.mention)
			}
			if ok, _ := exists(context.Background(), store, commitName(2)); ok {
				t.Error("an invalid commit was written")
			}
		})
	}
	t.Run("compaction (dataChange=false) of an append-only table is allowed", func(t *testing.T) {
		snap := createTable(t, Open(objstore.NewMemory()), nil, map[string]string{"delta.appendOnly": "true"})
		snap = appendFiles(t, snap, "a.parquet", "b.parquet")
		tx := snap.NewTransaction(Operation{Name: "OPTIMIZE"})
		for _, f := range snap.Files() {
			tx.Remove(f.Remove(1, false))
		}
		merged := dataFile("ab.parquet", 20, nil)
		merged.DataChange = false
		tx.Add(merged)
		if _, err := tx.Commit(context.Background()); err != nil {
			t.Fatalf("compaction refused: %v", err)
		}
	})
}

func TestOwnCommitAfterExistsIsRecognised(t *testing.T) {
	ctx := context.Background()
	store := &ghostStore{Store: objstore.NewMemory()}
	snap := createTable(t, Open(store), nil, nil)
	if snap.Version() != 0 {
		t.Fatalf("create landed at version %d, want 0", snap.Version())
	}
	snap = appendFiles(t, snap, "a.parquet")
	if snap.Version() != 1 {
		t.Fatalf("append landed at version %d, want 1 (its own commit)", snap.Version())
	}
	if ok, _ := exists(ctx, store, commitName(2)); ok {
		t.Fatal("the commit was written twice")
	}
	sameSnapshot(t, mustSnapshot(t, Open(store)), snap)
}

func TestTimeTravelByVersionAndTimestamp(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	start := clock.Now()
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{Now: clock.Now})
	snap := createTable(t, tbl, nil, nil)
	for i := range 4 {
		clock.Advance(time.Minute)
		snap = appendFiles(t, snap, string(rune('a'+i))+".parquet")
	}
	tests := []struct {
		name    string
		at      time.Time
		version int64
	}{
		{"exactly at a commit gives that commit", start.Add(2 * time.Minute), 2},
		{"between commits gives the earlier one", start.Add(2*time.Minute + 30*time.Second), 2},
		{"at creation gives version 0", start, 0},
		{"after the latest commit gives the latest version", start.Add(time.Hour), 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tbl.SnapshotAsOf(ctx, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if s.Version() != tt.version || len(s.Files()) != int(tt.version) {
				t.Fatalf("version %d with %d files, want %d", s.Version(), len(s.Files()), tt.version)
			}
			byVersion, err := tbl.SnapshotAt(ctx, tt.version)
			if err != nil {
				t.Fatal(err)
			}
			sameSnapshot(t, s, byVersion)
		})
	}
	t.Run("before the first commit is not found", func(t *testing.T) {
		if _, err := tbl.SnapshotAsOf(ctx, start.Add(-time.Second)); !errors.Is(err, ErrVersionNotFound) {
			t.Fatalf("err = %v, want ErrVersionNotFound", err)
		}
	})
	t.Run("timestamps that go backwards are made monotonic", func(t *testing.T) {
		clock.Advance(-time.Hour) // a writer with a slow clock
		snap = appendFiles(t, snap, "late.parquet")
		s, err := tbl.SnapshotAsOf(ctx, start.Add(4*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if s.Version() != 4 {
			t.Fatalf("version = %d, want 4 (version 5 is placed after 4)", s.Version())
		}
	})
}

func TestSchemaHelpers(t *testing.T) {
	snap := createTable(t, Open(objstore.NewMemory()), nil, nil)
	if f, ok := snap.Schema().Field("id"); !ok || f.Type != value.Long {
		t.Errorf("schema field id = %+v, %v", f, ok)
	}
}

// lostAckStore performs commit writes but reports a transport error, as a
// request whose response was lost does.
type lostAckStore struct{ objstore.Store }

var errLostAck = errors.New("connection reset")

func (s lostAckStore) Write(ctx context.Context, name string, r io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	info, err := s.Store.Write(ctx, name, r, opts)
	if err == nil && opts.IfAbsent {
		return objstore.Info{}, errLostAck
	}
	return info, err
}

func TestCommitSurvivesALostAcknowledgement(t *testing.T) {
	mem := objstore.NewMemory()
	snap := createTable(t, Open(mem), nil, nil)
	snap, err := OpenWith(lostAckStore{mem}, Options{}).SnapshotAt(context.Background(), snap.Version())
	if err != nil {
		t.Fatal(err)
	}
	next := appendFiles(t, snap, "a.parquet")
	if next.Version() != 1 {
		t.Fatalf("version = %d, want 1", next.Version())
	}
}

func TestATransactionCommitsOnlyOnce(t *testing.T) {
	snap := createTable(t, Open(objstore.NewMemory()), nil, nil)
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("a.parquet", 1, nil))
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(context.Background()); !errors.Is(err, ErrInvalidCommit) {
		t.Fatalf("second commit err = %v, want ErrInvalidCommit", err)
	}
}

func TestReadingATxnVersionKeepsABlindAppendBlind(t *testing.T) {
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), nil, nil)
	tx := snap.NewTransaction(Operation{Name: "STREAMING UPDATE"})
	if _, ok := tx.TxnVersion("app"); ok {
		t.Fatal("unexpected txn")
	}
	tx.SetTxn("app", 1)
	tx.Add(dataFile("a.parquet", 1, nil))
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := parseCommit(1, readAll(t, store, commitName(1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.info.IsBlindAppend == nil || !*c.info.IsBlindAppend {
		t.Error("isBlindAppend = false, want true")
	}
}

func TestRemoveWithExtendedMetadataAlwaysWritesPartitionValues(t *testing.T) {
	store := objstore.NewMemory()
	snap := appendFiles(t, createTable(t, Open(store), nil, nil), "a.parquet")
	tx := snap.NewTransaction(Operation{Name: "DELETE"})
	tx.Remove(snap.Files()[0].Remove(5, true))
	if _, err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	body := string(readAll(t, store, commitName(2)))
	if !strings.Contains(body, `"extendedFileMetadata":true`) || !strings.Contains(body, `"partitionValues":{}`) || !strings.Contains(body, `"deletionTimestamp":5`) {
		t.Fatalf("remove line lacks extended metadata fields:\n%s", body)
	}
}
