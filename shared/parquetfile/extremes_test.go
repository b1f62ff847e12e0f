package parquetfile

import (
	"bytes"
	"math"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// TestExtremesTakeTheOrderOfTheValues: a wide decimal's bytes compare
// signed, a float's NaN is apart, and the extremes outlive their page.
func TestExtremesTakeTheOrderOfTheValues(t *testing.T) {
	dec := func(b ...byte) parquet.Value { return parquet.FixedLenByteArrayValue(b) }
	e := NewExtremes(parquet.FixedLenByteArrayType(2), true, false)
	page := []byte{0x00, 0x05, 0xff, 0xfe, 0x7f, 0x00}
	for i := 0; i < len(page); i += 2 {
		e.Add(dec(page[i : i+2]...))
	}
	e.EndPage()
	clear(page)
	lo, hi, ok := e.Bounds()
	if !ok || !bytes.Equal(lo.ByteArray(), []byte{0xff, 0xfe}) || !bytes.Equal(hi.ByteArray(), []byte{0x7f, 0x00}) {
		t.Fatalf("decimal bounds %x %x %v, want fffe 7f00", lo.ByteArray(), hi.ByteArray(), ok)
	}
	f := NewExtremes(parquet.DoubleType, false, true)
	for _, x := range []float64{2, math.NaN(), -1} {
		f.Add(parquet.DoubleValue(x))
	}
	lo, hi, ok = f.Bounds()
	if !f.NaN() || !ok || lo.Double() != -1 || hi.Double() != 2 {
		t.Fatalf("double bounds %v %v %v, NaN %v", lo, hi, ok, f.NaN())
	}
	none := NewExtremes(parquet.Int64Type, false, false)
	if _, _, ok := none.Bounds(); ok {
		t.Fatal("bounds of no value")
	}
}
