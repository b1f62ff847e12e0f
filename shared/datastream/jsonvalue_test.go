package datastream

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

// checkSmallDecimal fails when smallDecimal accepts text but converts it
// otherwise than toDecimal does.
func checkSmallDecimal(t *testing.T, text string, dt value.DecimalType) (accepted bool) {
	t.Helper()
	got, ok := smallDecimal([]byte(text), dt, nil)
	if !ok {
		return false
	}
	want, err := toDecimal(text, dt)
	if err != nil {
		t.Fatalf("smallDecimal(%q, %s) = %s, but toDecimal refuses it: %v", text, dt, got, err)
	}
	if got.Scale != want.Scale || got.Unscaled.Cmp(want.Unscaled) != 0 {
		t.Fatalf("smallDecimal(%q, %s) = %s (scale %d), toDecimal gives %s (scale %d)", text, dt, got, got.Scale, want, want.Scale)
	}
	return true
}

func TestSmallDecimalAgreesWithToDecimal(t *testing.T) {
	d122 := value.DecimalType{Precision: 12, Scale: 2}
	tests := []struct {
		name     string
		text     string
		dt       value.DecimalType
		accepted bool
	}{
		{"two fraction digits", "1680787.36", d122, true},
		{"a negative value", "-12.5", d122, true},
		{"an integer", "7", d122, true},
		{"negative zero", "-0.0", d122, true},
		{"trailing zeros beyond the scale", "1.2300", d122, true},
		{"digits beyond the scale", "1.234", d122, false},
		{"too many digits for the precision", "12345678901.5", d122, false},
		{"an exponent", "1e3", d122, false},
		{"19 digits", "1234567890123456789", value.DecimalType{Precision: 38, Scale: 0}, false},
		{"leading zeros of a fraction", "0.000000000000000001", value.DecimalType{Precision: 38, Scale: 18}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkSmallDecimal(t, tt.text, tt.dt); got != tt.accepted {
				t.Errorf("smallDecimal(%q, %s) accepted = %v, want %v", tt.text, tt.dt, got, tt.accepted)
			}
		})
	}
	t.Run("random numbers at every scale read as toDecimal reads them", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		accepted := 0
		for range 20000 {
			text := fmt.Sprintf("%d", rng.Int64N(1e12)-5e11)
			if k := rng.IntN(8); k > 0 {
				text += "." + fmt.Sprintf("%0*d", k, rng.Int64N(1e7))[:k]
			}
			dt := value.DecimalType{Precision: 1 + rng.IntN(38), Scale: rng.IntN(10)}
			if checkSmallDecimal(t, text, dt) {
				accepted++
			}
		}
		// Refusing is always safe (toDecimal decides); the fast path must
		// still take the common case.
		if accepted < 5000 {
			t.Errorf("smallDecimal accepted %d of 20000 numbers", accepted)
		}
	})
}
