package mergebench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// tableID is the simulated source table of the merge scenarios.
const tableID = "shop.customers"

// TargetFileBytes is the product default (config.DefaultTargetFileBytes):
// the base tables are laid out as compaction leaves them, key-sorted files
// rolled at this size.
const TargetFileBytes = 128 << 20

// BatchSize and its mix: 70% updates, 20% inserts, 10% deletes.
const (
	BatchSize    = 10_000
	BatchUpdates = BatchSize * 70 / 100
	BatchInserts = BatchSize * 20 / 100
	BatchDeletes = BatchSize - BatchUpdates - BatchInserts
)

// HotWindow is how many of the most recent keys a clustered batch touches:
// updates and deletes land on recent rows, as with auto-increment keys in
// OLTP tables. A random batch draws them from the whole key space.
const HotWindow = 100_000

// SourceSchema mirrors dssim's MySQL table.
var SourceSchema = value.StructType{Fields: []value.Field{
	{Name: "id", Type: value.Long, Nullable: true},
	{Name: "email", Type: value.String, Nullable: true},
	{Name: "name", Type: value.String, Nullable: true},
	{Name: "balance", Type: value.DecimalType{Precision: 12, Scale: 2}, Nullable: true},
	{Name: "created_at", Type: value.Timestamp, Nullable: true},
	{Name: "is_active", Type: value.Integer, Nullable: true},
	{Name: "notes", Type: value.String, Nullable: true},
}}

var (
	firstNames = []string{"Ada", "Grace", "Linus", "Barbara", "Edsger", "Frances", "Ken", "Margaret", "Dennis", "Radia", "Zoë", "José"}
	lastNames  = []string{"Lovelace", "Hopper", "Torvalds", "Liskov", "Dijkstra", "Allen", "Thompson", "Hamilton", "Ritchie", "Perlman", "Ñúñez", "O'Brien"}
	notes      = []string{"vip", "call back", "línea 2", "multi\nline", `quote "x"`, "🙂 emoji"}
	epoch      = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	streamTS   = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC).UnixMicro()
)

// mix is splitmix64: row values are a pure function of (id, version), so
// every table and batch is reproducible without holding a generator.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// sourceRow is the source columns of key id at a version.
func sourceRow(id int64, version uint64) []any {
	h := mix(uint64(id)*1_000_003 + version)
	var note any
	if h%3 != 0 {
		note = notes[(h>>8)%uint64(len(notes))]
	}
	return []any{
		id,
		"user" + strconv.FormatInt(id, 10) + "+" + strconv.FormatUint((h>>12)%1000, 10) + "@example.com",
		firstNames[(h>>22)%uint64(len(firstNames))] + " " + lastNames[(h>>26)%uint64(len(lastNames))],
		value.Decimal{Unscaled: big.NewInt(int64((h>>30)%200_000_000) - 5_000_000), Scale: 2},
		value.Micros(epoch + int64((h>>20)%(700*86400*1_000_000))),
		int32(h >> 63),
		note,
	}
}

// orderBytes is a change's ordering key: base rows use their id, batch
// changes 2^40+i, so every batch change is newer than the stored row.
func orderBytes(n uint64) []byte { return binary.BigEndian.AppendUint64([]byte{1}, n) }

// BaseStateRow is the state-table row of key id before any batch.
func BaseStateRow(id int64) []any {
	row := sourceRow(id, 0)
	return append(row, value.Micros(streamTS+id*1000), "INSERT", "mysql-bin.000017:"+strconv.FormatInt(id, 10), orderBytes(uint64(id)))
}

// TableDirs are the three tables of one benchmark table.
type TableDirs struct{ Root string }

func (d TableDirs) State() string      { return filepath.Join(d.Root, "state") }
func (d TableDirs) History() string    { return filepath.Join(d.Root, "history") }
func (d TableDirs) Tombstones() string { return filepath.Join(d.Root, "tombstones") }

// TableSet opens the three directories, made if missing, as the tables of
// the benchmark table.
func (d TableDirs) TableSet() (cdc.TableSet, error) {
	t := cdc.TableSet{ID: tableID}
	for _, x := range []struct {
		dst *objstore.Store
		dir string
	}{{&t.State, d.State()}, {&t.History, d.History()}, {&t.Tombstones, d.Tombstones()}} {
		if err := os.MkdirAll(x.dir, 0o755); err != nil {
			return t, fmt.Errorf("create %s: %w", x.dir, err)
		}
		s, err := objstore.NewLocal(x.dir)
		if err != nil {
			return t, fmt.Errorf("open %s: %w", x.dir, err)
		}
		*x.dst = s
	}
	return t, nil
}

// BuildStateTable writes a current-state table of ids 1..rows the way
// compaction leaves one: key-sorted, rolled at the target file size, with
// the table properties cdc expects.
func BuildStateTable(ctx context.Context, d TableDirs, rows int64) (files int, bytes int64, err error) {
	return buildTable(ctx, d, cdc.StateSchema(SourceSchema), nil, rows, func(id int64) [][]any { return [][]any{BaseStateRow(id)} })
}

// BuildSCD2Table writes an scd2 table (cdc.ModeSCD2) of ids 1..keys, two
// versions each: an older version closed by the current one, whose values
// are the BaseStateRow's, so that a batch update opens a third version.
// It writes them in one file sorted by key and valid-from, then runs the
// product's compaction on the table (cdc.CompactionOptions, as
// maintenance does), which leaves the closed versions and the open ones
// in files of their own, each sorted by key and valid-from.
func BuildSCD2Table(ctx context.Context, d TableDirs, keys int64) (files int, bytes int64, err error) {
	if _, _, err := buildTable(ctx, d, cdc.SCD2Schema(SourceSchema), map[string]string{cdc.PropMode: string(cdc.ModeSCD2)}, keys, SCD2Rows); err != nil {
		return 0, 0, err
	}
	store, err := objstore.NewLocal(d.State())
	if err != nil {
		return 0, 0, fmt.Errorf("open state store: %w", err)
	}
	snap, err := delta.Open(store).Snapshot(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read scd2 table: %w", err)
	}
	o := cdc.CompactionOptions(snap)
	o.TargetFileBytes = TargetFileBytes
	if _, err := snap.Optimize(ctx, o); err != nil {
		return 0, 0, fmt.Errorf("compact scd2 table: %w", err)
	}
	if snap, err = delta.Open(store).Snapshot(ctx); err != nil {
		return 0, 0, fmt.Errorf("read compacted scd2 table: %w", err)
	}
	for _, a := range snap.Files() {
		bytes += a.Size
	}
	return snap.NumFiles(), bytes, nil
}

// SCD2Rows are the two version rows of key id in BuildSCD2Table's table.
func SCD2Rows(id int64) [][]any {
	from0 := value.Micros(streamTS + id*1000)
	from1 := from0 + 500
	pos := "mysql-bin.000017:" + strconv.FormatInt(id, 10)
	old := append(sourceRow(id, 2), from0, "INSERT", pos+"a", orderBytes(uint64(id)<<1), from0, from1, false, nil)
	cur := orderBytes(uint64(id)<<1 | 1)
	now := append(sourceRow(id, 0), from1, "UPDATE-INSERT", pos+"b", cur, from1, nil, true, cur)
	return [][]any{old, now}
}

// buildTable writes a state table of schema, with the properties cdc
// expects and conf, holding rowsOf(id) for ids 1..keys in that order.
func buildTable(ctx context.Context, d TableDirs, schema value.StructType, conf map[string]string, keys int64, rowsOf func(int64) [][]any) (files int, bytes int64, err error) {
	store, err := objstore.NewLocal(mustMkdir(d.State()))
	if err != nil {
		return 0, 0, fmt.Errorf("open state store: %w", err)
	}
	props := map[string]string{cdc.PropTable: tableID, cdc.PropRole: "state", cdc.PropKey: "id"}
	maps.Copy(props, conf)
	snap, err := delta.Create(ctx, store, delta.CreateOptions{Schema: schema, Name: tableID, Configuration: props})
	if err != nil {
		return 0, 0, fmt.Errorf("create state table: %w", err)
	}
	var adds []delta.Add
	var w *delta.FileWriter
	roll := func() error {
		if w == nil {
			return nil
		}
		a, err := w.Close(ctx)
		w = nil
		if err != nil {
			return fmt.Errorf("close data file: %w", err)
		}
		adds = append(adds, a)
		return nil
	}
	for id := int64(1); id <= keys; id++ {
		if w == nil {
			// The page size of the state files merges write: their
			// lookups read the key column page by page.
			if w, err = delta.NewFileWriter(ctx, store, delta.WriteOptions{Schema: schema, DataChange: true, PageBytes: cdc.StatePageBytes}); err != nil {
				return 0, 0, fmt.Errorf("new data file: %w", err)
			}
		}
		for _, row := range rowsOf(id) {
			if err := w.Write(row); err != nil {
				return 0, 0, fmt.Errorf("write row of key %d: %w", id, err)
			}
		}
		if id%4096 == 0 && w.BytesWritten() >= TargetFileBytes {
			if err := roll(); err != nil {
				return 0, 0, err
			}
		}
	}
	if err := roll(); err != nil {
		return 0, 0, err
	}
	tx := snap.NewTransaction(delta.Operation{Name: "WRITE", Parameters: map[string]string{"mode": "Append", "partitionBy": "[]"}})
	tx.Add(adds...)
	if _, err := tx.Commit(ctx); err != nil {
		return 0, 0, fmt.Errorf("commit state table: %w", err)
	}
	for _, a := range adds {
		bytes += a.Size
	}
	return len(adds), bytes, nil
}

func mustMkdir(dir string) string {
	_ = os.MkdirAll(dir, 0o755)
	return dir
}

// BatchChange is one change of the benchmark batch.
type BatchChange struct {
	id     int64
	delete bool
	insert bool
	n      uint64 // order sequence
}

// PlanBatch picks the batch's keys for a table of rows ids: distinct keys,
// updates and deletes from the hot window (clustered) or the whole table
// (random, and ModeRandomDV), inserts above the largest id.
func PlanBatch(rows int64, mode string) []BatchChange {
	lo := int64(1)
	if mode == "clustered" && rows > HotWindow {
		lo = rows - HotWindow + 1
	}
	span := uint64(rows - lo + 1)
	seen := map[int64]bool{}
	var out []BatchChange
	n := uint64(1 << 40)
	for i := uint64(0); len(out) < BatchUpdates+BatchDeletes; i++ {
		id := lo + int64(mix(i^0x5bd1e995)%span)
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, BatchChange{id: id, delete: len(out) >= BatchUpdates, n: n})
		n++
	}
	for i := int64(1); i <= BatchInserts; i++ {
		out = append(out, BatchChange{id: rows + i, insert: true, n: n})
		n++
	}
	return out
}

// eventOf renders a batch change as the decoded event cdc consumes.
func eventOf(c BatchChange) datastream.Event {
	ts := value.Micros(streamTS + int64(c.n-(1<<40))*1000 + 86_400_000_000)
	op, ct := datastream.OpUpsert, "UPDATE-INSERT"
	row := sourceRow(c.id, 1)
	switch {
	case c.delete:
		op, ct = datastream.OpDelete, "DELETE"
		row = sourceRow(c.id, 0)
	case c.insert:
		ct = "INSERT"
	}
	pos := "mysql-bin.000018:" + strconv.FormatUint(c.n-(1<<40), 10)
	return datastream.Event{
		Table:    datastream.TableID{Database: "shop", Table: "customers"},
		KeyNames: []string{"id"}, KeyValues: []any{c.id},
		Op: op, Order: datastream.OrderKey{Bytes: orderBytes(c.n), Text: pos},
		SourceTimestamp: ts, ReadMethod: datastream.CDC, ChangeType: ct, Schema: SourceSchema, Row: row,
		Meta: datastream.Metadata{
			UUID: "bench-" + strconv.FormatUint(c.n, 16), SourceTimestamp: ts, ReadTimestamp: ts, ReadMethod: "mysql-cdc-binlog",
			ChangeType: ct, IsDeleted: c.delete, Object: "shop_customers",
			File: &datastream.SourceFile{Bucket: "bench", Name: "shop_customers/batch.jsonl"}, Record: int64(c.n - (1 << 40) + 1),
		},
	}
}

// BuildBatch turns the plan into the cdc batch the merge function applies.
func BuildBatch(plan []BatchChange) (cdc.Batch, error) {
	b := cdc.Batch{Source: SourceSchema, Key: []string{"id"}}
	for _, c := range plan {
		ch, err := cdc.ChangeFromHistory(cdc.HistoryRow(eventOf(c)), SourceSchema, []int{0})
		if err != nil {
			return b, fmt.Errorf("build change for id %d: %w", c.id, err)
		}
		b.Changes = append(b.Changes, ch)
	}
	return b, nil
}

// WriteBatchParquet writes the batch for the DuckDB baseline: state rows
// plus a delete flag, written with dsdelta's writer (untimed).
func WriteBatchParquet(ctx context.Context, dir string, plan []BatchChange) (string, error) {
	store, err := objstore.NewLocal(mustMkdir(dir))
	if err != nil {
		return "", fmt.Errorf("open batch store: %w", err)
	}
	schema := cdc.StateSchema(SourceSchema)
	schema.Fields = append(schema.Fields, value.Field{Name: "bench_delete", Type: value.Boolean, Nullable: false})
	w, err := delta.NewFileWriter(ctx, store, delta.WriteOptions{Schema: schema, FileName: "batch.parquet"})
	if err != nil {
		return "", fmt.Errorf("new batch file: %w", err)
	}
	for _, c := range plan {
		ev := eventOf(c)
		var ct any = ev.ChangeType
		row := append(append([]any(nil), ev.Row...), ev.SourceTimestamp, ct, ev.Order.Text, ev.Order.Bytes, c.delete)
		if err := w.Write(row); err != nil {
			w.Abort()
			return "", fmt.Errorf("write batch row %d: %w", c.id, err)
		}
	}
	if _, err := w.Close(ctx); err != nil {
		return "", fmt.Errorf("close batch file: %w", err)
	}
	return filepath.Join(dir, "batch.parquet"), nil
}

// ListFiles lists the regular files below dir (relative paths).
func ListFiles(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out[rel] = true
		}
		return nil
	})
	return out, err
}

// ResetTable removes what a merge added, so the next merge starts from the
// same base table: new files in the state table, and the history and
// tombstone tables.
func ResetTable(d TableDirs, base map[string]bool) error {
	now, err := ListFiles(d.State())
	if err != nil {
		return fmt.Errorf("list %s: %w", d.State(), err)
	}
	for p := range now {
		if !base[p] {
			if err := os.Remove(filepath.Join(d.State(), p)); err != nil {
				return fmt.Errorf("reset %s: %w", p, err)
			}
		}
	}
	for _, dir := range []string{d.History(), d.Tombstones()} {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("reset %s: %w", dir, err)
		}
	}
	return nil
}
