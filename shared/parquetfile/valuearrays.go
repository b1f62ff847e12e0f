package parquetfile

import (
	"sync"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"
)

// ValueArrays lends RowWriter.WriteInOrder the arrays it converts a
// file's rows into (a value per row and column: 24 MB for a staged part of
// 50,000 rows and 20 columns) and takes them back, cleared, for the next
// file's. Made for each file, such arrays came as fresh pages: under a
// memory limit the runtime returns freed ones to the system, so each part
// faulted its arrays in and zeroed them again. Staging a backfill of 20
// files two at a time, the arrays taken again cut staging's CPU time by a
// tenth. A sync.Pool holds them: the collector drops those no file asks
// for again, and Drop lets them all go at once. The zero value is ready;
// safe for concurrent use.
type ValueArrays struct {
	pool atomic.Pointer[sync.Pool]
	// given, when set (by tests), sees each array given back, before the
	// pool takes it: what a pool keeps is not the pool's to promise.
	given func([]parquet.Value)
}

// get returns an array of n zero values; a nil *ValueArrays makes one.
func (a *ValueArrays) get(n int) []parquet.Value {
	if a != nil {
		if p, ok := a.current().Get().(*[]parquet.Value); ok && cap(*p) >= n {
			return (*p)[:n]
		}
	}
	return make([]parquet.Value, n)
}

// put takes back an array of zero values.
func (a *ValueArrays) put(vals []parquet.Value) {
	if a != nil && cap(vals) > 0 {
		if a.given != nil {
			a.given(vals)
		}
		vals = vals[:0]
		a.current().Put(&vals)
	}
}

// Drop lets go of the arrays held, for the process to use the memory
// otherwise (a merge after the files are staged); arrays lent meanwhile
// come back to a new pool.
func (a *ValueArrays) Drop() { a.pool.Store(new(sync.Pool)) }

// current is the pool arrays are taken from and given back to.
func (a *ValueArrays) current() *sync.Pool {
	for {
		if p := a.pool.Load(); p != nil {
			return p
		}
		a.pool.CompareAndSwap(nil, new(sync.Pool))
	}
}
