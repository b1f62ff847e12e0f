package datastream

import (
	"math/big"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestSmallFractionParsesAsParseDecimalTextDoes(t *testing.T) {
	al := &slabs{}
	for _, text := range []string{"0.5", "-0.5", "1.25", "-1234567.89", "0.50", "-0.0", "0.000", "00.10",
		"123456789012345678.0", "12345678901234567.89", "0.000000000000000001", "999999999999999999.9",
		"-0.00000000000000000000000000000000000000001", "3.14159"} {
		want, err := parseDecimalText(text)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := smallFraction([]byte(text), al)
		if !ok {
			continue // left to parseDecimalText: fine, if rare
		}
		if got.Scale != want.Scale || got.Unscaled.Cmp(want.Unscaled) != 0 {
			t.Errorf("smallFraction(%s) = %s (scale %d), want %s (scale %d)", text, got.Unscaled, got.Scale, want.Unscaled, want.Scale)
		}
	}
	for _, text := range []string{"5", "1e3", "1.5e3", "1234567890123456789.5"} {
		if _, ok := smallFraction([]byte(text), al); ok {
			t.Errorf("smallFraction(%s) took a number it should leave to parseDecimalText", text)
		}
	}
}

func TestIntegerNumberIsIsIntegerTextOfTheNumbersText(t *testing.T) {
	for _, v := range []any{int64(0), int64(-7), int64(1 << 62), value.Decimal{}, dec(125, 1), dec(-3, 0), dec(42, -2), dec(0, 2), dec(-1, 2), "1e5", "12"} {
		if got, want := integerNumber(v, ""), isIntegerText(numberText(v)); got != want {
			t.Errorf("integerNumber(%#v) = %v, want %v (text %q)", v, got, want, numberText(v))
		}
	}
	if integerNumber(int64(100), "1e2") {
		t.Error("the kept text decides: 1e2 is not integer text")
	}
}

// dec is the decimal unscaled × 10^-scale.
func dec(unscaled int64, scale int) value.Decimal {
	return value.Decimal{Unscaled: big.NewInt(unscaled), Scale: scale}
}
