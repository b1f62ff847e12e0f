package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
)

// serializeDV builds Delta's portable RoaringBitmapArray bytes.
func pqSerializeDV(t *testing.T, rows []uint64) []byte {
	t.Helper()
	bm := roaring64.BitmapOf(rows...)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(dvMagicPortable))
	if _, err := bm.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func pqInlineDV(t *testing.T, rows []uint64) *DeletionVector {
	t.Helper()
	data := pqSerializeDV(t, rows)
	return &DeletionVector{StorageType: "i", PathOrInlineDv: z85Encode(data), SizeInBytes: int32(len(data)), Cardinality: int64(len(rows))}
}

func TestZ85RoundTripsAndMatchesTheSpecVector(t *testing.T) {
	// The ZeroMQ Z85 specification's test vector.
	raw := []byte{0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B}
	if got := z85Encode(raw); got != "HelloWorld" {
		t.Errorf("z85Encode = %q, want HelloWorld", got)
	}
	back, err := z85Decode("HelloWorld")
	if err != nil || !bytes.Equal(back, raw) {
		t.Errorf("z85Decode = %x, %v", back, err)
	}
	for _, bad := range []string{"abcd", "abc\"e", "#####"} {
		if _, err := z85Decode(bad); err == nil {
			t.Errorf("z85Decode(%q) succeeded", bad)
		}
	}
}

func TestStoragePathResolvesEachStorageType(t *testing.T) {
	tests := []struct {
		name string
		dv   DeletionVector
		want string
	}{
		{"a UUID without prefix names a file at the root", DeletionVector{StorageType: "u", PathOrInlineDv: "IjB3V2d3#qUP%s94R0WF"}, "deletion_vector_899cef78-06b3-4c14-b024-03860e62cd40.bin"},
		{"a prefixed UUID names a file in the prefix directory", DeletionVector{StorageType: "u", PathOrInlineDv: "ab" + "WYbkwCTB$gH)J7t?$/sK"}, "ab/deletion_vector_b6a98cdd-7843-470d-8897-708cdffa38c5.bin"},
		{"an absolute path is returned as is", DeletionVector{StorageType: "p", PathOrInlineDv: "gs://b/t/dv.bin"}, "gs://b/t/dv.bin"},
		{"an inline vector has no file", DeletionVector{StorageType: "i", PathOrInlineDv: "HelloWorld"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.dv.StoragePath()
			if err != nil || got != tc.want {
				t.Errorf("StoragePath() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := (DeletionVector{StorageType: "u", PathOrInlineDv: "short"}).StoragePath(); !errors.Is(err, ErrDeletionVector) {
		t.Errorf("short UUID: err = %v, want ErrDeletionVector", err)
	}
	if _, err := (DeletionVector{StorageType: "x"}).StoragePath(); !errors.Is(err, ErrDeletionVector) {
		t.Errorf("unknown type: err = %v, want ErrDeletionVector", err)
	}
}

func TestDeletionVectorFilesDecodeToTheDeletedRows(t *testing.T) {
	t.Run("the golden table's on-disk vector holds rows 0 and 1", func(t *testing.T) {
		s := pqFixtureStore(t, "basic-dv-no-checkpoint")
		off := int32(1)
		bm, err := loadDeletionVector(context.Background(), s, DeletionVector{StorageType: "u", PathOrInlineDv: "IjB3V2d3#qUP%s94R0WF", Offset: &off, SizeInBytes: 36, Cardinality: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := bm.ToArray(); !reflect.DeepEqual(got, []uint64{0, 1}) {
			t.Errorf("deleted rows = %v, want [0 1]", got)
		}
	})
	t.Run("our serialization of rows 0 and 9 is byte-identical to Spark's", func(t *testing.T) {
		s := pqFixtureStore(t, "table-with-dv-small")
		file := s.objects["test%dv%prefix-deletion_vector_b6a98cdd-7843-470d-8897-708cdffa38c5.bin"]
		if len(file) != 45 {
			t.Fatalf("DV file has %d bytes, want 45", len(file))
		}
		if got := pqSerializeDV(t, []uint64{0, 9}); !bytes.Equal(got, file[5:41]) {
			t.Errorf("bitmap bytes\n got %x\nwant %x", got, file[5:41])
		}
	})
	t.Run("an inline vector spanning 64-bit buckets decodes", func(t *testing.T) {
		rows := []uint64{3, 1 << 33, 1<<33 + 7}
		bm, err := loadDeletionVector(context.Background(), newPQMemStore(), *pqInlineDV(t, rows))
		if err != nil {
			t.Fatal(err)
		}
		if got := bm.ToArray(); !reflect.DeepEqual(got, rows) {
			t.Errorf("rows = %v, want %v", got, rows)
		}
	})
}

func TestCorruptDeletionVectorsAreRejected(t *testing.T) {
	data := pqSerializeDV(t, []uint64{1, 2})
	file := func(mutate func([]byte)) *pqMemStore {
		var b bytes.Buffer
		b.WriteByte(1)
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(data))
		raw := b.Bytes()
		mutate(raw)
		s := newPQMemStore()
		s.objects["deletion_vector_899cef78-06b3-4c14-b024-03860e62cd40.bin"] = raw
		return s
	}
	dv := DeletionVector{StorageType: "u", PathOrInlineDv: "IjB3V2d3#qUP%s94R0WF", SizeInBytes: int32(len(data)), Cardinality: 2}
	tests := []struct {
		name   string
		mutate func([]byte)
		dv     DeletionVector
		want   string
	}{
		{"an intact file loads", func([]byte) {}, dv, ""},
		{"a flipped bitmap byte fails the checksum", func(b []byte) { b[10] ^= 0xFF }, dv, "checksum"},
		{"a wrong size field is caught", func(b []byte) { b[4]++ }, dv, "stored size"},
		{"a cardinality mismatch is caught", func([]byte) {}, DeletionVector{StorageType: "u", PathOrInlineDv: dv.PathOrInlineDv, SizeInBytes: dv.SizeInBytes, Cardinality: 3}, "descriptor says 3"},
		{"an unknown magic is caught", func(b []byte) {
			b[5] = 0
			binary.BigEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[5:len(b)-4]))
		}, dv, "magic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadDeletionVector(context.Background(), file(tc.mutate), tc.dv)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v", err)
			case tc.want != "" && (!errors.Is(err, ErrDeletionVector) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want ErrDeletionVector mentioning %q", err, tc.want)
			}
		})
	}
}

// FuzzDeletionVectorBytes feeds arbitrary inline deletion vectors to the
// Z85 and RoaringBitmapArray decoders: they must fail cleanly, not panic.
func FuzzDeletionVectorBytes(f *testing.F) {
	f.Add(z85Encode([]byte{0xd1, 0xd3, 0x39, 0x64, 1, 0, 0, 0, 0, 0, 0, 0}), int32(12), int64(0))
	f.Add("HelloWorld", int32(8), int64(1))
	// Found by fuzzing: a bucket count far beyond the data made roaring64
	// allocate without bound and panic.
	f.Add("^Bg9^0000000001", int32(12), int64(0))
	f.Fuzz(func(t *testing.T, inline string, size int32, card int64) {
		loadDeletionVector(context.Background(), newPQMemStore(), DeletionVector{StorageType: "i", PathOrInlineDv: inline, SizeInBytes: size, Cardinality: card})
	})
}
