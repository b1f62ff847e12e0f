package delta

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Shared test helpers for the log side of the package.

// fixtureStore opens a Spark-written fixture table read-only.
func fixtureStore(t testing.TB, name string) objstore.Store {
	t.Helper()
	st, err := objstore.NewLocal(fixture.Path(t, "delta", name))
	if err != nil {
		t.Fatalf("open fixture %s: %v", name, err)
	}
	return st
}

// fixtureCopy copies a fixture table to a temporary directory so a test may
// change it, and returns the directory and a store on it.
func fixtureCopy(t testing.TB, name string) (string, objstore.Store) {
	t.Helper()
	src := fixture.Path(t, "delta", name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy fixture %s: %v", name, err)
	}
	st, err := objstore.NewLocal(dst)
	if err != nil {
		t.Fatal(err)
	}
	return dst, st
}

// testClock is a settable clock for commit timestamps and retention.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *testClock {
	return &testClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testSchema() value.StructType {
	return value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long, Nullable: false},
		{Name: "name", Type: value.String, Nullable: true},
		{Name: "dt", Type: value.String, Nullable: true},
	}}
}

// createTable creates a table with testSchema on store.
func createTable(t testing.TB, tbl *Table, partitionBy []string, conf map[string]string) *Snapshot {
	t.Helper()
	snap, err := tbl.Create(context.Background(), CreateOptions{Schema: testSchema(), PartitionColumns: partitionBy, Configuration: conf, Name: "test"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return snap
}

// dataFile returns an add for a (not necessarily existing) data file.
func dataFile(path string, rows int64, pv map[string]*string) Add {
	if pv == nil {
		pv = map[string]*string{}
	}
	return Add{Path: path, PartitionValues: pv, Size: 100 + rows, ModificationTime: 1, DataChange: true,
		Stats: fmt.Sprintf(`{"numRecords":%d}`, rows)}
}

// putFile writes a data file object so that vacuum can see it.
func putFile(t testing.TB, store objstore.Store, name string) {
	t.Helper()
	if _, err := store.Write(context.Background(), name, strings.NewReader("data:"+name), objstore.WriteOptions{}); err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
}

// appendFiles commits blind appends of the given paths (10 rows each).
func appendFiles(t testing.TB, snap *Snapshot, paths ...string) *Snapshot {
	t.Helper()
	tx := snap.NewTransaction(Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append"}})
	for _, p := range paths {
		tx.Add(dataFile(p, 10, nil))
	}
	next, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatalf("append %v: %v", paths, err)
	}
	return next
}

func filePaths(adds []Add) []string {
	out := make([]string, len(adds))
	for i, a := range adds {
		out[i] = a.Path
	}
	return out
}

func mustSnapshot(t testing.TB, tbl *Table) *Snapshot {
	t.Helper()
	s, err := tbl.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func readAll(t testing.TB, store objstore.Store, name string) []byte {
	t.Helper()
	r, err := store.NewReader(context.Background(), name, 0, -1)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameSnapshot fails unless two snapshots hold the same reconciled state.
func sameSnapshot(t testing.TB, got, want *Snapshot) {
	t.Helper()
	if got.Version() != want.Version() {
		t.Errorf("version = %d, want %d", got.Version(), want.Version())
	}
	if g, w := fmt.Sprintf("%+v", got.Protocol()), fmt.Sprintf("%+v", want.Protocol()); g != w {
		t.Errorf("protocol = %s, want %s", g, w)
	}
	gm, wm := got.Metadata(), want.Metadata()
	if gm.ID != wm.ID || gm.SchemaString != wm.SchemaString || fmt.Sprint(gm.PartitionColumns) != fmt.Sprint(wm.PartitionColumns) ||
		fmt.Sprint(gm.Configuration) != fmt.Sprint(wm.Configuration) {
		t.Errorf("metadata = %+v, want %+v", gm, wm)
	}
	if g, w := addsString(got.Files()), addsString(want.Files()); g != w {
		t.Errorf("files differ:\n got %s\nwant %s", g, w)
	}
	if g, w := txnsString(got.Txns()), txnsString(want.Txns()); g != w {
		t.Errorf("txns = %s, want %s", g, w)
	}
}

func txnsString(m map[string]Txn) string {
	var parts []string
	for _, x := range m {
		lu := "-"
		if x.LastUpdated != nil {
			lu = fmt.Sprint(*x.LastUpdated)
		}
		parts = append(parts, fmt.Sprintf("%s=%d@%s", x.AppID, x.Version, lu))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func addsString(adds []Add) string {
	var b strings.Builder
	for _, a := range adds {
		// dataChange is not compared: checkpoints store false (as Spark does).
		fmt.Fprintf(&b, "%s|%d|%s|%s|%s;", a.Path, a.Size, a.Stats, pvString(a.PartitionValues), dvID(a.DeletionVector))
	}
	return b.String()
}

func pvString(pv map[string]*string) string {
	parts := []string{}
	for k, v := range pv {
		if v == nil {
			parts = append(parts, k+"=<null>")
		} else {
			parts = append(parts, k+"="+*v)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func strp(s string) *string { return &s }

// ghostStore makes the first put-if-absent of every commit file succeed
// and then report ErrExists, as a GCS client retry after a successful but
// unacknowledged upload does.
type ghostStore struct {
	objstore.Store
	mu    sync.Mutex
	ghost map[string]bool
}

func (g *ghostStore) Write(ctx context.Context, name string, r io.Reader, opts objstore.WriteOptions) (objstore.Info, error) {
	info, err := g.Store.Write(ctx, name, r, opts)
	if err != nil || !opts.IfAbsent || !strings.HasSuffix(name, ".json") {
		return info, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ghost == nil {
		g.ghost = map[string]bool{}
	}
	if g.ghost[name] {
		return info, nil
	}
	g.ghost[name] = true
	return objstore.Info{}, fmt.Errorf("write %s: %w", name, objstore.ErrExists)
}

func TestParseIntervalAcceptsDeltaPropertyForms(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"interval 7 days", 7 * 24 * time.Hour},
		{"interval 1 week", 7 * 24 * time.Hour},
		{"168 hours", 168 * time.Hour},
		{"INTERVAL 2 DAYS 12 HOURS", 60 * time.Hour},
		{"interval 30 minutes", 30 * time.Minute},
		{"interval 1 second", time.Second},
		{"interval 0 days", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in+" parses", func(t *testing.T) {
			got, err := ParseInterval(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseInterval(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "interval", "7", "interval 7 fortnights", "interval x days", "interval 1 month", "-1 days"} {
		t.Run(fmt.Sprintf("%q is refused", bad), func(t *testing.T) {
			if d, err := ParseInterval(bad); err == nil {
				t.Fatalf("ParseInterval(%q) = %v, want an error", bad, d)
			}
		})
	}
}

func TestCreateWritesVersionZeroLikeSpark(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), []string{"dt"}, map[string]string{"delta.appendOnly": "false"})
	if snap.Version() != 0 {
		t.Fatalf("version = %d, want 0", snap.Version())
	}
	c, err := parseCommit(0, readAll(t, store, commitName(0)))
	if err != nil {
		t.Fatal(err)
	}
	if c.info == nil || c.info.Operation != "CREATE TABLE" || !strings.HasPrefix(c.info.EngineInfo, "dsdelta/") || c.info.TxnID == "" {
		t.Errorf("commitInfo = %+v, want CREATE TABLE by dsdelta with a txnId", c.info)
	}
	first := strings.SplitN(string(readAll(t, store, commitName(0))), "\n", 2)[0]
	if !strings.HasPrefix(first, `{"commitInfo":`) {
		t.Errorf("first line = %s, want commitInfo", first)
	}
	loaded := mustSnapshot(t, Open(store))
	if p := loaded.Protocol(); p.MinReaderVersion != 1 || p.MinWriterVersion != 2 {
		t.Errorf("protocol = %+v, want (1,2)", p)
	}
	md := loaded.Metadata()
	if len(md.ID) != 36 || md.CreatedTime == nil || md.Format.Provider != "parquet" {
		t.Errorf("metadata = %+v, want a UUID id, createdTime and parquet format", md)
	}
	if got := loaded.PartitionColumns(); len(got) != 1 || got[0] != "dt" {
		t.Errorf("partition columns = %v", got)
	}
	if !value.Equal(loaded.Schema(), testSchema()) {
		t.Errorf("schema = %s", loaded.Schema())
	}
	t.Run("creating it again fails with ErrTableExists", func(t *testing.T) {
		_, err := Create(ctx, store, CreateOptions{Schema: testSchema()})
		if !errors.Is(err, ErrTableExists) {
			t.Fatalf("err = %v, want ErrTableExists", err)
		}
	})
	t.Run("a partition column missing from the schema is refused", func(t *testing.T) {
		_, err := Create(ctx, objstore.NewMemory(), CreateOptions{Schema: testSchema(), PartitionColumns: []string{"nope"}})
		if !errors.Is(err, ErrInvalidCommit) {
			t.Fatalf("err = %v, want ErrInvalidCommit", err)
		}
	})
	t.Run("an empty store is not a table", func(t *testing.T) {
		_, err := Open(objstore.NewMemory()).Snapshot(ctx)
		if !errors.Is(err, ErrNotATable) {
			t.Fatalf("err = %v, want ErrNotATable", err)
		}
	})
}

// putCommit writes a raw commit file.
func putCommit(t testing.TB, store objstore.Store, v int64, body string) {
	t.Helper()
	if _, err := store.Write(context.Background(), commitName(v), strings.NewReader(body), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatalf("put commit %d: %v", v, err)
	}
}
