package delta

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestKeepRowsReadsWhatAPlainReadDoes(t *testing.T) {
	schema := pqAllTypesSchema()
	rows := pqAllTypesRows()
	// More rows than a slab holds of strings, binary values, longs and
	// timestamps, distinct from one row to the next.
	for i := range 700 {
		r := make([]any, len(schema.Fields))
		r[0] = int64(1000 + i*i)
		r[7] = fmt.Sprintf("row %d", i)
		r[8] = []byte(r[7].(string))
		r[10] = value.Micros(1_700_000_000_000_000 + int64(i)*7)
		rows = append(rows, r)
	}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: schema, DataChange: true}, rows)
	md := pqMetadata(schema, nil, nil)
	want := pqRead(t, store, md, add, ReadOptions{})
	got := pqRead(t, store, md, add, ReadOptions{KeepRows: true})
	runtime.GC() // the slabs must stay alive through the values alone
	if len(got) != len(rows) || len(want) != len(rows) {
		t.Fatalf("read %d and %d rows, want %d", len(got), len(want), len(rows))
	}
	for i := range want {
		if err := sameValue(got[i], want[i]); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if !pqEqual(got[i], rows[i]) {
			t.Fatalf("row %d:\n got %#v\nwant %#v", i, got[i], rows[i])
		}
	}
}

// sameValue reports where a and b differ in value, Go type or (for byte
// slices) in being nil.
func sameValue(a, b any) error {
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !pqEqual(a, b) {
		return fmt.Errorf("%#v (%T) differs from %#v (%T)", a, a, b, b)
	}
	switch x := a.(type) {
	case []byte:
		if (x == nil) != (b.([]byte) == nil) {
			return fmt.Errorf("%#v differs from %#v", a, b)
		}
	case []any:
		for i := range x {
			if err := sameValue(x[i], b.([]any)[i]); err != nil {
				return err
			}
		}
	case []value.MapEntry:
		for i, e := range x {
			if err := sameValue(e.Key, b.([]value.MapEntry)[i].Key); err != nil {
				return err
			}
			if err := sameValue(e.Value, b.([]value.MapEntry)[i].Value); err != nil {
				return err
			}
		}
	}
	return nil
}
