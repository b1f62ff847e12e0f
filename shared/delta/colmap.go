package delta

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Column mapping (delta.columnMapping.mode): with "name" or "id" the names
// used in Parquet files, statistics and partitionValues are the fields'
// physical names; with "id" Parquet columns are matched by field id first.

// Column mapping modes, as stored in delta.columnMapping.mode.
const (
	ColumnMappingNone = "none"
	ColumnMappingName = "name"
	ColumnMappingID   = "id"
)

// Field metadata keys of column mapping.
const (
	metaPhysicalName = "delta.columnMapping.physicalName"
	metaColumnID     = "delta.columnMapping.id"
)

// ColumnMappingMode returns the table's column mapping mode from its
// configuration: "none", "name" or "id".
func ColumnMappingMode(md Metadata) string {
	switch m := md.Configuration["delta.columnMapping.mode"]; m {
	case ColumnMappingName, ColumnMappingID:
		return m
	}
	return ColumnMappingNone
}

// PhysicalName returns the name field f has in data files, statistics and
// partition values under the given column mapping mode.
func PhysicalName(f value.Field, mode string) string {
	if mode == ColumnMappingName || mode == ColumnMappingID {
		if s, ok := f.Metadata[metaPhysicalName].(string); ok && s != "" {
			return s
		}
	}
	return f.Name
}

// columnNaming names the fields of a data file under column mapping mode
// mode: their physical names, and with "name" or "id" their column ids
// as Parquet field ids.
func columnNaming(mode string) parquetfile.Naming {
	return func(f value.Field) (string, int) {
		id := 0
		if mode == ColumnMappingID || mode == ColumnMappingName {
			id = int(columnID(f))
		}
		return PhysicalName(f, mode), id
	}
}

// columnID returns the field's column mapping id, or 0 when it has none.
func columnID(f value.Field) int64 {
	switch v := f.Metadata[metaColumnID].(type) {
	case float64:
		return int64(v)
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case int64:
		return v
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// validColumnMappingMode checks a mode given in options.
func validColumnMappingMode(mode string) error {
	switch mode {
	case "", ColumnMappingNone, ColumnMappingName, ColumnMappingID:
		return nil
	}
	return fmt.Errorf("unknown column mapping mode %q", mode)
}
