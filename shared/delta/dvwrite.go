package delta

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/google/uuid"
)

// Writing deletion vectors, per PROTOCOL.md of delta-io/delta:
//   - "Deletion Vectors" and "Deletion Vector Descriptor Schema": a vector is
//     referenced from an add action by storageType "u" (a file beside the
//     data files, named by a Z85-encoded UUID after an optional random
//     prefix), "p" (an absolute path) or "i" (the bitmap inline, Z85), with
//     offset, sizeInBytes and cardinality;
//   - Appendix "Deletion Vector Format": the bitmap is a RoaringBitmapArray,
//     a 4-byte little-endian magic then, for the portable format
//     (1681511377), the 64-bit extension of the Roaring format spec: an
//     8-byte little-endian bucket count, then per bucket in ascending order
//     its 4-byte key (the high 32 bits of the row index) and a 32-bit
//     portable RoaringBitmap of the low 32 bits;
//   - Appendix "Deletion Vector File Storage Format": a version byte (1),
//     then per vector a big-endian int32 size of the bitmap, the bitmap, and
//     a big-endian CRC-32 of the bitmap; a descriptor's offset points at the
//     size field.
//
// The bytes match what Spark writes (RoaringBitmapArray.serializeAsByteArray
// with the Portable format, and DeletionVectorStore's framing). Two details
// make that so, and are why the framing is ours rather than roaring64's
// WriteTo:
//   - Spark's RoaringBitmapArray is an array indexed by the high 32 bits and
//     serializes every slot from 0 to the highest key, empty ones included
//     (an empty 32-bit bitmap is 8 bytes); roaring64 writes only the
//     non-empty buckets. Below 2^32 the two agree; above it they do not.
//   - Spark adds rows one by one and does not run-optimize, so a container
//     is an array up to 4096 values and a bitset above; we rebuild each
//     32-bit bitmap with AddMany, which chooses the same way, whatever
//     containers the caller's bitmap holds.

// dvFormatVersion is the first byte of every deletion vector file.
const dvFormatVersion = 1

// maxDVHighKey is the largest high 32-bit key Spark's RoaringBitmapArray can
// hold (its MAX_REPRESENTABLE_VALUE is (Int.MaxValue-1)<<32 | 0xFFFFFFFF).
const maxDVHighKey = math.MaxInt32 - 1

// emptyRoaring32Bytes is the size of an empty 32-bit portable RoaringBitmap
// (cookie and a zero container count), which fills each gap bucket.
const emptyRoaring32Bytes = 8

// EncodeDeletionVector serializes the deleted row indexes in rows as Delta's
// RoaringBitmapArray in the portable format: the bytes a DV file frames and
// an inline descriptor Z85-encodes. A nil or empty set encodes to the magic
// and a zero bucket count. Row indexes at or above 2^63-2^32 cannot be
// represented (Spark's limit), nor can a set whose encoding would exceed the
// int32 sizeInBytes of a descriptor.
func EncodeDeletionVector(rows *roaring64.Bitmap) ([]byte, error) {
	if rows == nil {
		rows = roaring64.New()
	}
	buckets, err := splitBuckets(rows)
	if err != nil {
		return nil, err
	}
	size := int64(4 + 8)
	for _, b := range buckets {
		if b == nil {
			size += 4 + emptyRoaring32Bytes
		} else {
			size += 4 + int64(b.GetSerializedSizeInBytes())
		}
		if size > math.MaxInt32 {
			return nil, fmt.Errorf("%w: encoding exceeds %d bytes", ErrDeletionVector, math.MaxInt32)
		}
	}
	var out bytes.Buffer
	out.Grow(int(size))
	var word [8]byte
	binary.LittleEndian.PutUint32(word[:4], dvMagicPortable)
	out.Write(word[:4])
	binary.LittleEndian.PutUint64(word[:], uint64(len(buckets)))
	out.Write(word[:])
	empty := roaring.New()
	for key, b := range buckets {
		binary.LittleEndian.PutUint32(word[:4], uint32(key))
		out.Write(word[:4])
		if b == nil {
			b = empty
		}
		if _, err := b.WriteTo(&out); err != nil {
			return nil, fmt.Errorf("encode deletion vector bucket %d: %w", key, err)
		}
	}
	if int64(out.Len()) != size {
		return nil, fmt.Errorf("%w: encoded %d bytes, expected %d", ErrDeletionVector, out.Len(), size)
	}
	return out.Bytes(), nil
}

// splitBuckets returns one 32-bit bitmap per high key from 0 to the highest,
// nil for a key that holds no rows.
func splitBuckets(rows *roaring64.Bitmap) ([]*roaring.Bitmap, error) {
	if rows.IsEmpty() {
		return nil, nil
	}
	maxHigh := rows.Maximum() >> 32
	if maxHigh > maxDVHighKey {
		return nil, fmt.Errorf("%w: row index %d is beyond the largest a deletion vector holds", ErrDeletionVector, rows.Maximum())
	}
	// Each gap bucket costs 12 bytes; refuse before allocating the slice.
	if maxHigh > math.MaxInt32/(4+emptyRoaring32Bytes) {
		return nil, fmt.Errorf("%w: row index %d needs %d buckets", ErrDeletionVector, rows.Maximum(), maxHigh+1)
	}
	buckets := make([]*roaring.Bitmap, maxHigh+1)
	var (
		buf  = make([]uint64, 4096)
		lows = make([]uint32, 0, 4096)
		it   = rows.ManyIterator()
	)
	flush := func(high uint64) {
		if len(lows) == 0 {
			return
		}
		if buckets[high] == nil {
			buckets[high] = roaring.New()
		}
		buckets[high].AddMany(lows)
		lows = lows[:0]
	}
	high := uint64(0)
	for n := it.NextMany(buf); n > 0; n = it.NextMany(buf) {
		for _, v := range buf[:n] {
			if h := v >> 32; h != high {
				flush(high)
				high = h
			}
			lows = append(lows, uint32(v))
		}
	}
	flush(high)
	return buckets, nil
}

// DecodeDeletionVector parses a RoaringBitmapArray (the bytes
// EncodeDeletionVector returns, or a bitmap from a DV file or an inline
// descriptor) into the set of deleted row indexes. Only the portable format
// is supported; keys must ascend, as Spark requires. Malformed input yields
// an error wrapping ErrDeletionVector, never a panic.
func DecodeDeletionVector(data []byte) (*roaring64.Bitmap, error) {
	return decodeRoaringBitmapArray(data)
}

// parseRoaringBitmapArray decodes the portable buckets after the magic.
// roaring64's ReadFrom would keep empty buckets and trust the key order, so
// the framing is read here and only the 32-bit bitmaps are left to roaring.
func parseRoaringBitmapArray(body []byte) (*roaring64.Bitmap, error) {
	if len(body) < 8 {
		return nil, fmt.Errorf("%w: bitmap has no bucket count", ErrDeletionVector)
	}
	n := binary.LittleEndian.Uint64(body)
	r := bytes.NewReader(body[8:])
	// Each bucket takes at least a 4-byte key and an 8-byte roaring header.
	if n > uint64(r.Len())/12 {
		return nil, fmt.Errorf("%w: %d buckets cannot fit in %d bytes", ErrDeletionVector, n, len(body))
	}
	out := roaring64.New()
	buf := make([]uint64, 4096)
	var key [4]byte
	last := int64(-1)
	for i := range n {
		if _, err := io.ReadFull(r, key[:]); err != nil {
			return nil, fmt.Errorf("%w: bucket %d: no key", ErrDeletionVector, i)
		}
		high := binary.LittleEndian.Uint32(key[:])
		if int64(high) <= last {
			return nil, fmt.Errorf("%w: bucket %d: key %d does not ascend", ErrDeletionVector, i, high)
		}
		if high > maxDVHighKey {
			return nil, fmt.Errorf("%w: bucket %d: key %d is out of range", ErrDeletionVector, i, high)
		}
		last = int64(high)
		bm, err := readRoaring32(r)
		if err != nil {
			return nil, fmt.Errorf("%w: bucket %d: %w", ErrDeletionVector, i, err)
		}
		it := bm.ManyIterator()
		for k := it.NextMany64(uint64(high)<<32, buf); k > 0; k = it.NextMany64(uint64(high)<<32, buf) {
			out.AddMany(buf[:k])
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last bucket", ErrDeletionVector, r.Len())
	}
	return out, nil
}

// readRoaring32 reads one 32-bit portable RoaringBitmap, turning a panic of
// the decoder on malformed input into an error: DV bytes come from outside
// and must never crash a merge.
func readRoaring32(r *bytes.Reader) (bm *roaring.Bitmap, err error) {
	defer func() {
		if p := recover(); p != nil {
			bm, err = nil, fmt.Errorf("decode bitmap: %v", p)
		}
	}()
	bm = roaring.New()
	if _, err := bm.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("decode bitmap: %w", err)
	}
	return bm, nil
}

// encodeDVFile frames encoded bitmaps as a DV file and returns the offset
// of each one (the position of its size field).
func encodeDVFile(bitmaps [][]byte) ([]byte, []int32, error) {
	size := int64(1)
	for _, b := range bitmaps {
		size += 4 + int64(len(b)) + 4
	}
	if size > math.MaxInt32 {
		return nil, nil, fmt.Errorf("%w: DV file of %d bytes exceeds int32 offsets", ErrDeletionVector, size)
	}
	file := make([]byte, 1, size)
	file[0] = dvFormatVersion
	offsets := make([]int32, len(bitmaps))
	for i, b := range bitmaps {
		offsets[i] = int32(len(file))
		file = binary.BigEndian.AppendUint32(file, uint32(len(b)))
		file = append(file, b...)
		file = binary.BigEndian.AppendUint32(file, crc32.ChecksumIEEE(b))
	}
	return file, offsets, nil
}

// dvFileDescriptors returns the "u" descriptors of the vectors of one DV
// file: the prefix directory and the file's UUID in Z85, each vector's
// offset, size and cardinality.
func dvFileDescriptors(prefix string, id uuid.UUID, bitmaps [][]byte, offsets []int32, cards []int64) []DeletionVector {
	path := prefix + z85Encode(id[:])
	out := make([]DeletionVector, len(bitmaps))
	for i := range bitmaps {
		off := offsets[i]
		out[i] = DeletionVector{StorageType: "u", PathOrInlineDv: path, Offset: &off, SizeInBytes: int32(len(bitmaps[i])), Cardinality: cards[i]}
	}
	return out
}

// WriteDeletionVectors writes one DV file holding every vector, in order,
// and returns a "u" descriptor for each. The file is
// <dir>/deletion_vector_<uuid>.bin in store (the table root); dir is the
// optional random prefix the protocol allows ("" for the table root), and
// it becomes the prefix of each descriptor's pathOrInlineDv. The file is
// created if absent, so a UUID clash fails rather than overwrites. A nil or
// empty vector is written too, with cardinality 0; callers normally leave a
// file without deleted rows without a deletion vector.
func WriteDeletionVectors(ctx context.Context, store objstore.Store, dir string, vectors []*roaring64.Bitmap) ([]DeletionVector, error) {
	dir = strings.Trim(dir, "/")
	if len(dir) >= 20 || strings.ContainsAny(dir, "/.") {
		// The reader splits the last 20 characters off as the UUID; keep the
		// prefix a single short directory name, as Spark does.
		return nil, fmt.Errorf("%w: prefix %q must be one directory name shorter than 20 characters", ErrDeletionVector, dir)
	}
	if len(vectors) == 0 {
		return nil, nil
	}
	bitmaps := make([][]byte, len(vectors))
	cards := make([]int64, len(vectors))
	for i, v := range vectors {
		b, err := EncodeDeletionVector(v)
		if err != nil {
			return nil, fmt.Errorf("encode deletion vector %d: %w", i, err)
		}
		bitmaps[i] = b
		if v != nil {
			cards[i] = int64(v.GetCardinality())
		}
	}
	file, offsets, err := encodeDVFile(bitmaps)
	if err != nil {
		return nil, err
	}
	id := uuid.New()
	dvs := dvFileDescriptors(dir, id, bitmaps, offsets, cards)
	name, err := dvs[0].StoragePath()
	if err != nil {
		return nil, err
	}
	if _, err := objstore.WriteBytes(ctx, store, name, file, objstore.WriteOptions{IfAbsent: true, ContentType: "application/octet-stream"}); err != nil {
		return nil, fmt.Errorf("write deletion vector file %s: %w", name, err)
	}
	return dvs, nil
}

// InlineDeletionVector returns an "i" descriptor holding rows in the log
// itself, Z85-encoded; the protocol allows it for small bitmaps, where a
// file would cost more than the bytes.
func InlineDeletionVector(rows *roaring64.Bitmap) (DeletionVector, error) {
	b, err := EncodeDeletionVector(rows)
	if err != nil {
		return DeletionVector{}, err
	}
	var card int64
	if rows != nil {
		card = int64(rows.GetCardinality())
	}
	return DeletionVector{StorageType: "i", PathOrInlineDv: z85Encode(b), SizeInBytes: int32(len(b)), Cardinality: card}, nil
}
