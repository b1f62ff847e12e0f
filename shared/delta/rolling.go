package delta

import (
	"context"
	"fmt"
	"slices"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// RollingWriter writes rows into data files rolled at a target size, so memory
// stays bounded by one row group whatever the number of rows.
type RollingWriter struct {
	ctx    context.Context
	store  objstore.Store
	opts   WriteOptions
	target int64
	w      *FileWriter
	adds   []Add
	rows   int64
	// For a partitioned table written without fixed partition values, one
	// rolling writer per partition, chosen by each row's values.
	partIdx []int
	parts   map[string]*RollingWriter
	// A row's partition values and their key text, reused from row to
	// row: every row of a partitioned table passes through them.
	vals []any
	key  []byte
}

// NewRollingWriter writes rows into files of the table in store, rolled
// when a file reaches target bytes. With partition columns and no fixed
// PartitionValues, each row goes to the file of its own partition.
func NewRollingWriter(ctx context.Context, store objstore.Store, opts WriteOptions, target int64) *RollingWriter {
	r := &RollingWriter{ctx: ctx, store: store, opts: opts, target: target}
	if len(opts.PartitionColumns) > 0 && opts.PartitionValues == nil {
		for _, c := range opts.PartitionColumns {
			r.partIdx = append(r.partIdx, opts.Schema.Index(c))
		}
		r.parts = map[string]*RollingWriter{}
	}
	return r
}

// Write adds one row (one value per schema field).
func (r *RollingWriter) Write(row []any) error {
	if r.parts != nil {
		r.vals = r.vals[:0]
		for _, j := range r.partIdx {
			var v any
			if j >= 0 {
				v = row[j]
			}
			r.vals = append(r.vals, v)
		}
		r.key = appendPartitionKey(r.key[:0], r.vals)
		sub := r.parts[string(r.key)]
		if sub == nil {
			o := r.opts
			o.PartitionValues = map[string]any{}
			for i, c := range o.PartitionColumns {
				o.PartitionValues[c] = r.vals[i]
			}
			sub = NewRollingWriter(r.ctx, r.store, o, r.target)
			r.parts[string(r.key)] = sub
		}
		return sub.Write(row)
	}
	if r.w == nil {
		w, err := NewFileWriter(r.ctx, r.store, r.opts)
		if err != nil {
			return err
		}
		r.w = w
	}
	if err := r.w.Write(row); err != nil {
		return err
	}
	r.rows++
	// BytesWritten flushes the writer's row batch, so ask only now and then:
	// asking per row would defeat the batching.
	if r.rows%sizeCheckRows == 0 && r.w.BytesWritten() >= r.target {
		return r.roll()
	}
	return nil
}

func (r *RollingWriter) roll() error {
	if r.w == nil {
		return nil
	}
	a, err := r.w.Close(r.ctx)
	r.w = nil
	if err != nil {
		return err
	}
	r.adds = append(r.adds, a)
	return nil
}

// Close finishes the open file(s) and returns every add.
func (r *RollingWriter) Close() ([]Add, error) {
	if r.parts != nil {
		keys := make([]string, 0, len(r.parts))
		for k := range r.parts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			a, err := r.parts[k].Close()
			if err != nil {
				r.Abort()
				return nil, err
			}
			r.adds = append(r.adds, a...)
		}
		r.parts = map[string]*RollingWriter{}
		return r.adds, nil
	}
	if err := r.roll(); err != nil {
		return nil, err
	}
	return r.adds, nil
}

// Abort discards the open file(s) (already closed ones are orphans that
// vacuum removes).
func (r *RollingWriter) Abort() {
	for _, p := range r.parts {
		p.Abort()
	}
	if r.w != nil {
		r.w.Abort()
		r.w = nil
	}
}

// appendPartitionKey appends a text that identifies a partition by its
// values to dst.
func appendPartitionKey(dst []byte, vals []any) []byte {
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, 0)
		}
		n := len(dst)
		enc, err := value.AppendJSON(dst, nil, v)
		if err != nil {
			enc = fmt.Appendf(dst[:n], "%v", v)
		}
		dst = enc
	}
	return dst
}

// sizeCheckRows is how many rows a RollingWriter writes between size checks.
const sizeCheckRows = 1024

// DiscardFiles deletes data files written for a commit that will not be
// made. A failure is left to vacuum, which deletes unreferenced files
// anyway.
func DiscardFiles(ctx context.Context, store objstore.Store, adds []Add) {
	for _, a := range adds {
		if name, err := a.ObjectName(); err == nil {
			_ = store.Delete(ctx, name)
		}
	}
}
