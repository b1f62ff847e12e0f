package datastream

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
)

// enc builds Avro binary encoding by hand, so that tests control every byte
// (hamba's generic encoder cannot express every union member).
type enc []byte

func (e enc) long(n int64) enc {
	return binary.AppendUvarint(e, uint64(n<<1)^uint64(n>>63))
}
func (e enc) str(s string) enc   { return append(e.long(int64(len(s))), s...) }
func (e enc) raw(b []byte) enc   { return append(e.long(int64(len(b))), b...) }
func (e enc) null() enc          { return e.long(0) }
func (e enc) some() enc          { return e.long(1) }
func (e enc) boolean(b bool) enc { return append(e, map[bool]byte{false: 0, true: 1}[b]) }
func (e enc) f32(f float32) enc  { return binary.LittleEndian.AppendUint32(e, math.Float32bits(f)) }
func (e enc) strs(ss ...string) enc {
	if len(ss) > 0 {
		e = e.long(int64(len(ss)))
		for _, s := range ss {
			e = e.str(s)
		}
	}
	return e.long(0)
}

// decimalBytes is the two's-complement big-endian encoding of n.
func decimalBytes(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// 2^(8k) + n for the smallest k that keeps the sign bit.
	k := len(n.Bytes()) + 1
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(8*k)), n)
	b := m.Bytes()
	for len(b) < k {
		b = append([]byte{0xff}, b...)
	}
	return b
}

// writeOCF frames pre-encoded records in an object container file with the
// given codec, blockLen records per block.
func writeOCF(t testing.TB, schema string, codec ocf.CodecName, blockLen int, records ...[]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatalf("parse test schema: %v", err)
	}
	w, err := ocf.NewEncoderWithSchema(s, &out, ocf.WithCodec(codec), ocf.WithBlockLength(blockLen), ocf.WithSchemaMarshaler(ocf.FullSchemaMarshaler))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if _, err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
