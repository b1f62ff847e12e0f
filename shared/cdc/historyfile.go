package cdc

import (
	"context"
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
	return f.read(ctx, delta.ReadOptions{}, fn)
}

// read reads the file's rows with ro.
func (f HistoryFile) read(ctx context.Context, ro delta.ReadOptions, fn func(row []any) error) error {
	md := delta.Metadata{SchemaString: f.Schema.SchemaString(), Format: delta.Format{Provider: "parquet"}, Configuration: map[string]string{}}
	for c := range f.Add.PartitionValues {
		md.PartitionColumns = append(md.PartitionColumns, c)
	}
	return delta.ReadFile(ctx, f.Store, md, f.Add, ro, fn)
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

// TakesFiles reports whether a history table of this metadata takes data
// files written by another writer as they are: its files are partitioned
// by source date alone and name columns by their logical names (the
// HistoryFile's writer knows no other layout).
func TakesFiles(md delta.Metadata) bool {
	return delta.ColumnMappingMode(md) == delta.ColumnMappingNone && slices.Equal(md.PartitionColumns, []string{ColSourceDate})
}

// CopyCandidate is a staged file whose parts a batch commits to the
// history as files (copies) in its last step, unless one of its steps
// finds one of the file's events there already: a re-delivery, or a late
// event a lookup cannot tell from one (dedup.go). Its events go to the
// state in their steps, marked InHistory and Candidate.
//
// Which files are new to the history is told by each step's own lookup,
// which costs what the step costs, where reading the history's keys to
// decide it before the first step cost what the history holds. So the
// copies wait for the last step. A step that breaks a candidate writes
// the file's rows of every key the steps up to it merged (Through), less
// the duplicates, and tells OnBroken; the steps after it write the file's
// rows as any file's. No step of the batch can hold another delivery of a
// candidate's event: the batch's key hashes keep a file that shares an
// event with another file of the batch out of the candidates.
type CopyCandidate struct {
	ID    string        // names the file to Batch.OnBroken
	Parts []HistoryFile // the file's staged parts, in the history's schema
	// Through is the span of the keys of the steps up to this one (nil:
	// every key), whose rows a break writes.
	Through *KeySpan
}

// writeBroken writes to w the rows of candidate c whose keys lie in its
// Through span, in the history's schema, but for the identities dup names
// (key text, 0, order), which it adds to. It returns the rows written.
func (c CopyCandidate) writeBroken(ctx context.Context, w *delta.RollingWriter, key []string, dup map[string]bool, schema value.StructType, overwrite bool, res *Result) (int64, error) {
	rows := int64(0)
	for _, hf := range c.Parts {
		keyIdx, err := KeyIndexes(hf.Schema, key)
		if err != nil {
			return rows, err
		}
		orderIdx := hf.Schema.Index(ColOrder)
		if orderIdx < 0 {
			return rows, fmt.Errorf("history file %s: no %s column", hf.Add.Path, ColOrder)
		}
		ro := delta.ReadOptions{}
		if c.Through != nil {
			ro.RowGroupFilter = c.Through.RowGroupFilter(hf.Schema.Fields[keyIdx[0]].Name)
		}
		keyVals := make([]any, len(keyIdx))
		var code, id []byte
		err = hf.read(ctx, ro, func(row []any) error {
			for i, k := range keyIdx {
				keyVals[i] = row[k]
			}
			if c.Through != nil {
				var err error
				if code, err = AppendRangeCode(code[:0], keyVals); err != nil {
					return err
				}
				if !c.Through.Contains(code) {
					return nil // a later step's
				}
			}
			order, _ := row[orderIdx].([]byte)
			id = append(append(AppendKeyText(id[:0], keyVals), 0), order...)
			if dup[string(id)] {
				res.Redelivered++
				return nil
			}
			dup[string(id)] = true
			r, err := conformFor(overwrite, row, hf.Schema, schema)
			if err == nil {
				err = w.Write(r)
			}
			rows++
			return err
		})
		if err != nil {
			return rows, fmt.Errorf("history file %s: %w", hf.Add.Path, err)
		}
	}
	return rows, nil
}
