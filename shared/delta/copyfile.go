package delta

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
)

// CopyDataFile copies a data file written by FileWriter for another table
// (or none) of the same schema, partition columns and writer options into
// store, a table's root, and returns its add action for a commit to that
// table: the same partition values, size and stats, under a new name in
// the partition's directory. The file's bytes are copied, not decoded: a
// writer that already wrote the rows (staging) spares the table's writer
// the encoding. The caller vouches that the file is what the table's
// writer would write (schema, partition columns, stats columns, column
// mapping); PROTOCOL.md "Add File and Remove File" asks nothing of a data
// file's history.
func CopyDataFile(ctx context.Context, from objstore.Store, add Add, store objstore.Store, partitionColumns []string) (Add, error) {
	return CopyDataFileAs(ctx, from, add, store, partitionColumns, uuid.NewString())
}

// CopyDataFileAs is CopyDataFile with the id the copy's name holds
// (part-00000-<id>-c000...). Copies made at once take ids drawn in turn
// beforehand, so that their names sort in the order the caller gives them
// whichever copy is made first: a table's files are visited in path order.
func CopyDataFileAs(ctx context.Context, from objstore.Store, add Add, store objstore.Store, partitionColumns []string, id string) (Add, error) {
	src, err := add.ObjectName()
	if err != nil {
		return Add{}, err
	}
	for _, c := range partitionColumns {
		if _, ok := add.PartitionValues[c]; !ok {
			return Add{}, fmt.Errorf("copy %s: no value for partition column %q", src, c)
		}
	}
	if len(add.PartitionValues) != len(partitionColumns) {
		return Add{}, fmt.Errorf("copy %s: partition values %v for partition columns %v", src, add.PartitionValues, partitionColumns)
	}
	suffix := ".parquet"
	for _, c := range []Compression{CompressionSnappy, CompressionZstd, CompressionGzip} {
		if _, codec, _ := parquetfile.WriteCodec(string(c)); strings.HasSuffix(src, codec+".parquet") {
			suffix = codec + ".parquet" // the codec, as FileWriter names its files
		}
	}
	name := "part-00000-" + id + "-c000" + suffix
	if len(partitionColumns) > 0 {
		name = partitionDir(partitionColumns, add.PartitionValues) + "/" + name
	}
	// Within one bucket the store copies it (a GCS rewrite): the bytes do
	// not pass through the process.
	info, err := objstore.Copy(ctx, from, src, store, name, objstore.WriteOptions{IfAbsent: true, ContentType: "application/vnd.apache.parquet"})
	if err != nil {
		return Add{}, fmt.Errorf("copy %s to %s: %w", src, name, err)
	}
	if info.Size != add.Size {
		// A staged file is never rewritten: a size that differs is a file
		// that is not the one its add describes.
		_ = store.Delete(context.WithoutCancel(ctx), name)
		return Add{}, fmt.Errorf("copy %s: %d bytes, its add says %d", src, info.Size, add.Size)
	}
	mod := info.Updated
	if mod.IsZero() {
		mod = time.Now()
	}
	return Add{
		Path:             encodeAddPath(name),
		PartitionValues:  add.PartitionValues,
		Size:             info.Size,
		ModificationTime: mod.UnixMilli(),
		DataChange:       true,
		Stats:            add.Stats,
	}, nil
}
