package datastream

import (
	"math/big"
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestBoxesHoldValuesAsAnyDoes(t *testing.T) {
	for _, al := range []*slabs{nil, {}} {
		var got, want []any
		// More than a slab of each, so boxes span several slabs.
		for i := range 3*256 + 5 {
			s := "s" + strconv.Itoa(i) // a string of its own, not a constant
			d := value.Decimal{Unscaled: big.NewInt(int64(i) * 101), Scale: 2}
			got = append(got, al.boxMicros(value.Micros(i)), al.boxLong(int64(-i)), al.boxDecimal(d), al.boxString(s))
			want = append(want, value.Micros(i), int64(-i), d, s)
		}
		// The collector must keep every slab alive through the boxes alone.
		runtime.GC()
		runtime.GC()
		for i := range got {
			if got[i] != want[i] && !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("box %d = %#v, want %#v", i, got[i], want[i])
			}
			if reflect.TypeOf(got[i]) != reflect.TypeOf(want[i]) {
				t.Fatalf("box %d has type %T, want %T", i, got[i], want[i])
			}
		}
		for i := 0; i < len(got); i += 4 {
			n := int64(i / 4)
			if v, ok := got[i].(value.Micros); !ok || int64(v) != n {
				t.Fatalf("type switch on box %d: %v %v", i, v, ok)
			}
			if v, ok := got[i+1].(int64); !ok || v != -n || got[i+1] != any(-n) {
				t.Fatalf("box %d compares unequal to any(%d)", i+1, -n)
			}
			if v, ok := got[i+3].(string); !ok || v != "s"+strconv.FormatInt(n, 10) {
				t.Fatalf("box %d = %q", i+3, v)
			}
		}
	}
}
