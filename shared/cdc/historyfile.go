package cdc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// A staged part whose rows are one source date's, in the history table's
// schema, written by the writer the history table uses, is already a
// history data file. When its events are new to the history, within the
// batch and against the table (KeyOrderHash tells, without reading the
// rows), the merge commits a copy of it (Batch.HistoryFiles) instead of
// decoding its rows and encoding them again; its changes, marked
// InHistory, still go to the state.

// HistoryFile is a data file that holds, as the history table's writer
// would write them, the history rows of a batch's changes marked
// InHistory (and, in a batch split into steps, of changes other steps
// apply to the state).
type HistoryFile struct {
	Store objstore.Store // where the file is (the lake)
	// Add is the file's add action in Store: path, size, partition values
	// (the source date) and stats.
	Add delta.Add
	// Schema is the schema of its rows, the history schema of its source
	// schema; the file is copied only when it is the history table's.
	Schema value.StructType
	Rows   int64
}

// rows reads the file's rows, for a history that cannot take the file as
// it is (its schema was widened in this very commit).
func (f HistoryFile) rows(ctx context.Context, fn func(row []any) error) error {
	md := delta.Metadata{SchemaString: f.Schema.SchemaString(), Format: delta.Format{Provider: "parquet"}, Configuration: map[string]string{}}
	for c := range f.Add.PartitionValues {
		md.PartitionColumns = append(md.PartitionColumns, c)
	}
	return delta.ReadFile(ctx, f.Store, md, f.Add, delta.ReadOptions{}, fn)
}

// KeyOrderHash is a 64-bit digest (FNV-1a) of an event's identity in the
// history: the range code of its key (AppendRangeCode) and its ordering
// key. Two deliveries of an event have the same; two events rarely do, and
// when they do the merge only writes their rows instead of copying them.
func KeyOrderHash(code, order []byte) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for n := len(code); ; n >>= 7 { // the code's length first: codes differ in length
		h = (h ^ uint64(n&0x7f)) * prime
		if n < 0x80 {
			break
		}
	}
	for _, c := range code {
		h = (h ^ uint64(c)) * prime
	}
	for _, c := range order {
		h = (h ^ uint64(c)) * prime
	}
	return h
}

var errUncodedKey = errors.New("a key without a range code")

// TakesFiles reports whether a history table of this metadata takes data
// files written by another writer as they are: its files are partitioned
// by source date alone and name columns by their logical names (the
// HistoryFile's writer knows no other layout).
func TakesFiles(md delta.Metadata) bool {
	return delta.ColumnMappingMode(md) == delta.ColumnMappingNone && slices.Equal(md.PartitionColumns, []string{ColSourceDate})
}

// HistoryKeyHashes returns, sorted, the KeyOrderHash of the rows of the
// history snap (nil: no table yet) that may have a source timestamp in
// [lo, hi]: those of the files and row groups whose source-timestamp
// bounds overlap it, in the source dates' partitions. It reads only the
// key and order columns. ok is false, with no hashes, when there would be
// more than limit of them, or when the table's key columns are not of the
// types the caller codes its keys as (want: nil to accept them).
func HistoryKeyHashes(ctx context.Context, snap *delta.Snapshot, key []string, want value.StructType, lo, hi value.Micros, limit int) (hashes []uint64, ok bool, err error) {
	if snap == nil || snap.NumFiles() == 0 {
		return nil, true, nil
	}
	source := SourceSchema(snap.Schema())
	keyIdx, err := KeyIndexes(source, key)
	if err != nil {
		return nil, false, err
	}
	names := make([]string, len(keyIdx))
	for i, k := range keyIdx {
		f := source.Fields[k]
		if len(want.Fields) > 0 {
			if w, found := want.Field(f.Name); !found || !value.Equal(w.Type, f.Type) {
				return nil, false, nil
			}
		}
		names[i] = f.Name
	}
	loDay, hiDay := value.DaysOf(lo.Time()), value.DaysOf(hi.Time())
	var files []delta.Add
	for _, f := range snap.Files() {
		if d := f.PartitionValues[ColSourceDate]; d != nil {
			day, err := delta.ParsePartitionValue(value.Date, d)
			if dd, isDay := day.(value.Days); err == nil && isDay && (dd < loDay || dd > hiDay) {
				continue
			}
		}
		files = append(files, f)
	}
	overlaps := func(flo, fhi any) bool {
		a, aok := flo.(value.Micros)
		b, bok := fhi.(value.Micros)
		return !aok || !bok || a <= hi && b >= lo
	}
	files = pruneByBounds(files, ColSourceTimestamp, value.Timestamp, overlaps)
	var rows int64
	for _, f := range files {
		st, err := delta.ParseStats(f.Stats)
		if err != nil || st.NumRecords <= 0 {
			rows = int64(limit) + 1 // unknown: counted as too many
			break
		}
		rows += st.NumRecords
	}
	if rows > int64(limit) {
		return nil, false, nil
	}
	cols := append(slices.Clone(names), ColOrder)
	ro := delta.ReadOptions{Columns: cols, RowGroupFilter: &delta.RowGroupFilter{Column: ColSourceTimestamp, Keep: overlaps}}
	keyVals := make([]any, len(names))
	var code []byte
	for _, f := range files {
		err := delta.ReadFile(ctx, snap.Store(), snap.Metadata(), f, ro, func(row []any) error {
			copy(keyVals, row[:len(names)])
			order, _ := row[len(names)].([]byte)
			var err error
			if code, err = AppendRangeCode(code[:0], keyVals); err != nil {
				return errUncodedKey // a null key of an older row: no hash to match
			}
			hashes = append(hashes, KeyOrderHash(code, order))
			return nil
		})
		if errors.Is(err, errUncodedKey) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read the keys of history file %s: %w", f.Path, err)
		}
	}
	slices.Sort(hashes)
	return hashes, true, nil
}
