package value

import (
	"bytes"
	"cmp"
	"fmt"
)

// Compare orders two values of the same type: -1, 0 or +1. Null sorts first.
// It is the order of primary keys in clustered files and of file statistics,
// so it must agree with how Parquet min/max compare: numbers numerically,
// strings and binary bytewise, decimals by value, dates and times in time.
func Compare(a, b any) int {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0
		case a == nil:
			return -1
		}
		return 1
	}
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
	case int32:
		if y, ok := b.(int32); ok {
			return cmp.Compare(x, y)
		}
	case int16:
		if y, ok := b.(int16); ok {
			return cmp.Compare(x, y)
		}
	case int8:
		if y, ok := b.(int8); ok {
			return cmp.Compare(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return cmp.Compare(x, y)
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y)
		}
	case Decimal:
		if y, ok := b.(Decimal); ok {
			return x.Cmp(y)
		}
	case Days:
		if y, ok := b.(Days); ok {
			return cmp.Compare(x, y)
		}
	case Micros:
		if y, ok := b.(Micros); ok {
			return cmp.Compare(x, y)
		}
	case LocalMicros:
		if y, ok := b.(LocalMicros); ok {
			return cmp.Compare(x, y)
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y)
		}
	case float32:
		if y, ok := b.(float32); ok {
			return cmp.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	}
	// Mixed types only arise from a caller bug; order by type name so sorts
	// stay total rather than panic.
	return cmp.Compare(fmt.Sprintf("%T", a), fmt.Sprintf("%T", b))
}

// CompareKeys orders composite keys column by column.
func CompareKeys(a, b []any) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// EqualValues reports whether two values are equal (same type and value); it
// recurses into structs, arrays and maps.
func EqualValues(a, b any) bool {
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !EqualValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case []MapEntry:
		y, ok := b.([]MapEntry)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !EqualValues(x[i].Key, y[i].Key) || !EqualValues(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	case Decimal:
		y, ok := b.(Decimal)
		return ok && x.Scale == y.Scale && x.Cmp(y) == 0
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || (x != x && y != y))
	case float32:
		y, ok := b.(float32)
		return ok && (x == y || (x != x && y != y))
	}
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
		return false
	}
	if x, ok := a.([]byte); ok {
		return bytes.Equal(x, b.([]byte))
	}
	return Compare(a, b) == 0
}
