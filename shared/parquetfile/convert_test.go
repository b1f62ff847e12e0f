package parquetfile

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func TestTwosComplementInt64DecodesWhatBigIntDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := [][]byte{{0}, {0x80}, {0xFF}, {0x7F}, {0, 0x80}, {0xFF, 0x7F},
		{0x80, 0, 0, 0, 0, 0, 0, 0}, {0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
		{0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0}, {0, 0x80, 0, 0, 0, 0, 0, 0, 0}, {0xFF, 0x7F, 0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}
	for range 2000 {
		b := make([]byte, 1+rng.IntN(16))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		if n := rng.IntN(len(b) + 1); rng.IntN(2) == 0 { // sign-extended
			ext := byte(0)
			if rng.IntN(2) == 0 {
				ext = 0xFF
			}
			for i := range n {
				b[i] = ext
			}
			if n < len(b) {
				b[n] = b[n]&0x7F | ext&0x80
			}
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		want := fromTwosComplement(b)
		x, ok := twosComplementInt64(b)
		if ok != want.IsInt64() || ok && x != want.Int64() {
			t.Fatalf("% x: %d, %v; want %v (fits 64 bits: %v)", b, x, ok, want, want.IsInt64())
		}
	}
}

func TestKeptBigIntsHoldTheirValuesApart(t *testing.T) {
	var k Kept
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 255, -256}
	for range 600 {
		xs = append(xs, rng.Int64()-rng.Int64())
	}
	got := make([]*big.Int, len(xs))
	for i, x := range xs {
		got[i] = k.bigInt(x)
	}
	got[1].Add(got[1], big.NewInt(1<<62)) // arithmetic on one leaves its neighbours alone
	got[1].Mul(got[1], got[1])
	for i, x := range xs {
		if i == 1 {
			continue
		}
		if want := big.NewInt(x); got[i].Cmp(want) != 0 || got[i].Sign() != want.Sign() || len(got[i].Bits()) != len(want.Bits()) {
			t.Fatalf("value %d = %v, want %v", i, got[i], want)
		}
	}
}
