package delta

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/google/uuid"
)

// fixtureDVs returns every deletion vector descriptor that the JSON commits
// of a fixture table mention (adds and removes, every version), once each.
func fixtureDVs(t *testing.T, dir string) []DeletionVector {
	t.Helper()
	commits, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	type key struct {
		storage, path string
		offset        int32
	}
	seen := map[key]bool{}
	var out []DeletionVector
	for _, c := range commits {
		f, err := os.Open(c)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if !bytes.Contains(sc.Bytes(), []byte(`"deletionVector":{`)) {
				continue
			}
			var a Action
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			for _, dv := range []*DeletionVector{addDV(a.Add), removeDV(a.Remove)} {
				if dv == nil {
					continue
				}
				k := key{dv.StorageType, dv.PathOrInlineDv, -1}
				if dv.Offset != nil {
					k.offset = *dv.Offset
				}
				if !seen[k] {
					seen[k] = true
					out = append(out, *dv)
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func addDV(a *Add) *DeletionVector {
	if a == nil {
		return nil
	}
	return a.DeletionVector
}

func removeDV(r *Remove) *DeletionVector {
	if r == nil {
		return nil
	}
	return r.DeletionVector
}

// TestSparkDeletionVectorsReencodeToTheSameBytes decodes every deletion
// vector of the Spark-written fixture tables, encodes the rows again, and
// requires Spark's exact bytes: per vector, and for a whole DV file when its
// vectors tile it, so that the version byte, sizes, offsets and checksums
// are checked too.
func TestSparkDeletionVectorsReencodeToTheSameBytes(t *testing.T) {
	ctx := context.Background()
	root := fixture.Path(t, "delta")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var vectors, files int
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		dvs := fixtureDVs(t, dir)
		if len(dvs) == 0 {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			store, err := objstore.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			type stored struct {
				dv   DeletionVector
				rows *roaring64.Bitmap
			}
			byFile := map[string][]stored{}
			for _, dv := range dvs {
				var (
					data []byte
					name string
				)
				switch dv.StorageType {
				case "i":
					raw, err := z85Decode(dv.PathOrInlineDv)
					if err != nil {
						t.Fatal(err)
					}
					data = raw[:dv.SizeInBytes]
				case "u":
					name, err = dv.StoragePath()
					if err == nil {
						name, err = resolveDVFile(ctx, store, name)
					}
					if err == nil {
						data, err = readDVFile(ctx, store, name, dv)
					}
					if err != nil {
						t.Fatal(err)
					}
				default:
					t.Logf("storage type %q is not re-encoded", dv.StorageType)
					continue
				}
				rows, err := DecodeDeletionVector(data)
				if err != nil {
					t.Fatal(err)
				}
				if int64(rows.GetCardinality()) != dv.Cardinality {
					t.Errorf("%s: %d rows, descriptor says %d", dv.PathOrInlineDv, rows.GetCardinality(), dv.Cardinality)
				}
				got, err := EncodeDeletionVector(rows)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data) {
					t.Errorf("%s: re-encoded bitmap\n got %x\nwant %x", dv.PathOrInlineDv, got, data)
				}
				vectors++
				if name != "" {
					byFile[name] = append(byFile[name], stored{dv, rows})
				}
			}
			for name, vs := range byFile {
				file, err := objstore.ReadAll(ctx, store, name)
				if err != nil {
					t.Fatal(err)
				}
				slices.SortFunc(vs, func(a, b stored) int { return int(*a.dv.Offset - *b.dv.Offset) })
				next := int32(1)
				var bitmaps [][]byte
				for _, v := range vs {
					if v.dv.Offset == nil || *v.dv.Offset != next {
						next = -1
						break
					}
					b, err := EncodeDeletionVector(v.rows)
					if err != nil {
						t.Fatal(err)
					}
					bitmaps = append(bitmaps, b)
					next += 4 + v.dv.SizeInBytes + 4
				}
				if int(next) != len(file) {
					t.Logf("%s: the descriptors do not cover the file; compared vector by vector only", name)
					continue
				}
				got, offsets, err := encodeDVFile(bitmaps)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, file) {
					t.Errorf("%s: re-encoded file\n got %x\nwant %x", name, got, file)
				}
				for i, v := range vs {
					if offsets[i] != *v.dv.Offset {
						t.Errorf("%s: vector %d at offset %d, Spark wrote %d", name, i, offsets[i], *v.dv.Offset)
					}
				}
				files++
			}
		})
	}
	if vectors == 0 || files == 0 {
		t.Fatalf("compared %d vectors and %d whole files; the DV fixtures were not found", vectors, files)
	}
	t.Logf("%d vectors and %d whole DV files match Spark byte for byte", vectors, files)
}

// TestEncodingAboveTwoToThe32FollowsSparksLayout checks the one place where
// Spark's RoaringBitmapArray differs from roaring64's own serialization:
// every bucket from 0 to the highest key is written, empty ones as an empty
// 32-bit bitmap (cookie 12346, no containers).
func TestEncodingAboveTwoToThe32FollowsSparksLayout(t *testing.T) {
	var want bytes.Buffer
	binary.Write(&want, binary.LittleEndian, uint32(dvMagicPortable))
	binary.Write(&want, binary.LittleEndian, uint64(3))
	binary.Write(&want, binary.LittleEndian, uint32(0))
	roaring.BitmapOf(1).WriteTo(&want)
	binary.Write(&want, binary.LittleEndian, uint32(1))
	want.Write([]byte{0x3a, 0x30, 0, 0, 0, 0, 0, 0})
	binary.Write(&want, binary.LittleEndian, uint32(2))
	roaring.BitmapOf(5).WriteTo(&want)

	got, err := EncodeDeletionVector(roaring64.BitmapOf(1, 2<<32|5))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want.Bytes())
	}
	back, err := DecodeDeletionVector(got)
	if err != nil {
		t.Fatal(err)
	}
	if rows := back.ToArray(); !reflect.DeepEqual(rows, []uint64{1, 2<<32 | 5}) {
		t.Errorf("decoded %v", rows)
	}
}

func TestEncodingDoesNotDependOnTheCallersContainers(t *testing.T) {
	rows := roaring64.New()
	rows.AddRange(100, 70000)
	plain, err := EncodeDeletionVector(rows)
	if err != nil {
		t.Fatal(err)
	}
	rows.RunOptimize()
	optimized, err := EncodeDeletionVector(rows)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain, optimized) {
		t.Error("a run-optimized bitmap encodes differently; Spark's writer never run-optimizes")
	}
}

func dvSet(values ...uint64) *roaring64.Bitmap { return roaring64.BitmapOf(values...) }

func dvRange(from, to uint64) *roaring64.Bitmap {
	b := roaring64.New()
	b.AddRange(from, to)
	return b
}

func dvRandom(seed uint64, n int, below uint64) *roaring64.Bitmap {
	r := rand.New(rand.NewPCG(seed, 7))
	b := roaring64.New()
	for range n {
		b.Add(r.Uint64N(below))
	}
	return b
}

// TestWrittenDeletionVectorsReadBack writes several vectors into one DV file
// (and inline) and reads each back through the table reader's path.
func TestWrittenDeletionVectorsReadBack(t *testing.T) {
	ctx := context.Background()
	sets := []struct {
		name string
		rows *roaring64.Bitmap
	}{
		{"an empty set", roaring64.New()},
		{"a single row", dvSet(0)},
		{"a few rows", dvSet(0, 9, 4095, 4096, 65535, 65536)},
		{"a dense range (bitset containers)", dvRange(0, 200_000)},
		{"an array container at its 4096 limit", dvRange(0, 4096)},
		{"a bitset container just past it", dvRange(0, 4097)},
		{"sparse rows over a billion", dvRandom(1, 5000, 1_000_000_000)},
		{"rows beyond 2^32 with an empty bucket between", dvSet(3, 1<<33, 1<<33+7, 5<<32)},
		{"dense rows beyond 2^32", dvRange(1<<32-10, 1<<32+100_000)},
	}
	for _, prefix := range []string{"", "ab"} {
		store := objstore.NewMemory()
		vectors := make([]*roaring64.Bitmap, len(sets))
		for i, s := range sets {
			vectors[i] = s.rows
		}
		dvs, err := WriteDeletionVectors(ctx, store, prefix, vectors)
		if err != nil {
			t.Fatal(err)
		}
		if len(dvs) != len(sets) {
			t.Fatalf("%d descriptors for %d vectors", len(dvs), len(sets))
		}
		name, err := dvs[0].StoragePath()
		if err != nil {
			t.Fatal(err)
		}
		want := dvFilePrefix
		if prefix != "" {
			want = prefix + "/" + dvFilePrefix
		}
		if !strings.HasPrefix(name, want) || !strings.HasSuffix(name, ".bin") {
			t.Errorf("prefix %q: file %s", prefix, name)
		}
		for i, s := range sets {
			t.Run("prefix "+prefix+": "+s.name+" reads back from the file", func(t *testing.T) {
				dv := dvs[i]
				if dv.StorageType != "u" || dv.PathOrInlineDv != dvs[0].PathOrInlineDv || !strings.HasPrefix(dv.PathOrInlineDv, prefix) {
					t.Errorf("descriptor %+v", dv)
				}
				got, err := loadDeletionVector(ctx, store, dv)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Equals(s.rows) {
					t.Errorf("read %d rows, wrote %d", got.GetCardinality(), s.rows.GetCardinality())
				}
			})
		}
	}
	for _, s := range sets {
		t.Run(s.name+" reads back inline", func(t *testing.T) {
			dv, err := InlineDeletionVector(s.rows)
			if err != nil {
				t.Fatal(err)
			}
			if dv.StorageType != "i" || dv.Offset != nil {
				t.Errorf("descriptor %+v", dv)
			}
			got, err := loadDeletionVector(ctx, objstore.NewMemory(), dv)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(s.rows) {
				t.Errorf("read %d rows, wrote %d", got.GetCardinality(), s.rows.GetCardinality())
			}
		})
	}
}

func TestDVFileLayoutAndDescriptors(t *testing.T) {
	a, _ := EncodeDeletionVector(dvSet(0, 9))
	b, _ := EncodeDeletionVector(dvSet(1))
	file, offsets, err := encodeDVFile([][]byte{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if file[0] != 1 || !reflect.DeepEqual(offsets, []int32{1, int32(1 + 4 + len(a) + 4)}) || len(file) != 1+8+len(a)+8+len(b) {
		t.Fatalf("file of %d bytes, offsets %v", len(file), offsets)
	}
	id := uuid.MustParse("b6a98cdd-7843-470d-8897-708cdffa38c5")
	dvs := dvFileDescriptors("ab", id, [][]byte{a, b}, offsets, []int64{2, 1})
	// The Z85 UUID of the table-with-dv-small fixture's descriptor.
	if dvs[1].PathOrInlineDv != "abWYbkwCTB$gH)J7t?$/sK" || *dvs[1].Offset != offsets[1] || dvs[1].SizeInBytes != int32(len(b)) || dvs[1].Cardinality != 1 {
		t.Errorf("descriptor %+v", dvs[1])
	}
}

func TestDeletionVectorsThatCannotBeWrittenAreRefused(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		prefix string
		rows   *roaring64.Bitmap
	}{
		{"a row index beyond Spark's largest", "", dvSet(uint64(maxDVHighKey+1) << 32)},
		{"a row index needing too many empty buckets", "", dvSet(1 << 60)},
		{"a prefix with a slash inside", "a/b", dvSet(1)},
		{"a prefix of 20 characters, which would read as a UUID", strings.Repeat("a", 20), dvSet(1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WriteDeletionVectors(ctx, objstore.NewMemory(), tc.prefix, []*roaring64.Bitmap{tc.rows})
			if !errors.Is(err, ErrDeletionVector) {
				t.Errorf("err = %v, want ErrDeletionVector", err)
			}
		})
	}
}

func TestMalformedRoaringBitmapArraysAreRejected(t *testing.T) {
	good, _ := EncodeDeletionVector(dvSet(1, 2<<32))
	descending := slices.Clone(good)
	// Buckets 0, 1 (empty) and 2; giving the first key 1 repeats key 1.
	binary.LittleEndian.PutUint32(descending[12:], 1)
	tests := []struct {
		name string
		data []byte
	}{
		{"keys that do not ascend", descending},
		{"trailing bytes", append(slices.Clone(good), 0)},
		{"a truncated bucket", good[:len(good)-1]},
		{"no bucket count", good[:6]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeDeletionVector(tc.data); !errors.Is(err, ErrDeletionVector) {
				t.Errorf("err = %v, want ErrDeletionVector", err)
			}
		})
	}
}

// FuzzDeletionVectorRoundTrip: any set of row indexes encodes, decodes to
// itself and encodes to the same bytes again; and any bytes that decode
// re-encode to bytes that decode to the same set.
func FuzzDeletionVectorRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0}, uint8(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(40))
	f.Add([]byte{}, uint8(3))
	spark, _ := EncodeDeletionVector(roaring64.BitmapOf(0, 9, 2<<32|5))
	f.Add(spark, uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, shift uint8) {
		rows := roaring64.New()
		for i := 0; i+8 <= len(raw); i += 8 {
			// Keep indexes where real files are (below 2^40), spread or
			// clustered by shift.
			rows.Add(binary.LittleEndian.Uint64(raw[i:]) >> (24 + shift%40))
		}
		enc, err := EncodeDeletionVector(rows)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeDeletionVector(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !back.Equals(rows) {
			t.Fatalf("decoded %v, encoded %v", back.ToArray(), rows.ToArray())
		}
		again, err := EncodeDeletionVector(back)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("second encoding differs: %v", err)
		}
		if dec, err := DecodeDeletionVector(raw); err == nil {
			if enc, err := EncodeDeletionVector(dec); err == nil {
				if back, err := DecodeDeletionVector(enc); err != nil || !back.Equals(dec) {
					t.Fatalf("outside bytes: re-encoding does not decode to the same set: %v", err)
				}
			}
		}
	})
}
