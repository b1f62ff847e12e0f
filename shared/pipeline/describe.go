package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// TableDescription is what a snapshot of a Delta table says of it (the
// CLI's describe), as it is printed in JSON.
type TableDescription struct {
	Version          int64             `json:"version"`
	Timestamp        string            `json:"timestamp"`
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Protocol         ProtocolVersions  `json:"protocol"`
	Schema           json.RawMessage   `json:"schema"`
	PartitionColumns []string          `json:"partition_columns"`
	Configuration    map[string]string `json:"configuration"`
	NumFiles         int               `json:"num_files"`
	// NumRecords is null when some file's count is unknown; RecordsCounted
	// then sums the files whose count is known, and UncountedFiles lists
	// the others.
	NumRecords     *int64          `json:"num_records"`
	RecordsCounted int64           `json:"records_counted"`
	UncountedFiles []UncountedFile `json:"uncounted_files"`
	SizeBytes      int64           `json:"size_bytes"`
	// ReaderRequirements name the reader features a reader must support
	// (those of the protocol, or implied by its reader version), each
	// with what an engine lacking it cannot do.
	ReaderRequirements []ReaderRequirement `json:"reader_requirements"`
	// DeletionVectors counts the live files with a deletion vector and
	// the rows those vectors delete (still stored: compaction purges them).
	DeletionVectors DeletionVectorCount `json:"deletion_vectors"`
	LastCheckpoint  *int64              `json:"last_checkpoint"`
	CreatedTime     string              `json:"created_time,omitempty"`
}

// ProtocolVersions is a table's protocol.
type ProtocolVersions struct {
	MinReaderVersion int      `json:"min_reader_version"`
	MinWriterVersion int      `json:"min_writer_version"`
	ReaderFeatures   []string `json:"reader_features"`
	WriterFeatures   []string `json:"writer_features"`
}

// UncountedFile is a live file whose record count is unknown: its stats
// lack numRecords and its Parquet footer could not be read. Path and size
// are what the log says.
type UncountedFile struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	Problem   string `json:"problem"` // FileProblem: "missing" or "unreadable"
	Error     string `json:"error"`
}

// ReaderRequirement is a reader feature a reader of the table must
// support, and what an engine without it cannot do.
type ReaderRequirement struct {
	Feature string `json:"feature"`
	Note    string `json:"note"`
}

// DeletionVectorCount counts the live files with a deletion vector and
// the rows their vectors delete.
type DeletionVectorCount struct {
	Files       int   `json:"files"`
	DeletedRows int64 `json:"deleted_rows"`
}

// Describe describes the snapshot of a table. Records are counted from
// the files' stats; files without stats have their Parquet footers read
// (one ranged read each). A file that is missing or unreadable leaves the
// total unknown rather than failing (UncountedFiles): the log still says
// what the table should hold, which is what an operator needs to see. It
// fails only when ctx ends.
func Describe(ctx context.Context, snap *delta.Snapshot) (TableDescription, error) {
	md, pr := snap.Metadata(), snap.Protocol()
	out := TableDescription{
		Version: snap.Version(), Timestamp: snap.Timestamp().UTC().Format(time.RFC3339Nano),
		ID: md.ID, Name: md.Name, Description: md.Description,
		Protocol: ProtocolVersions{MinReaderVersion: pr.MinReaderVersion, MinWriterVersion: pr.MinWriterVersion,
			ReaderFeatures: orEmpty(pr.ReaderFeatures), WriterFeatures: orEmpty(pr.WriterFeatures)},
		Schema: json.RawMessage(snap.Schema().SchemaString()), PartitionColumns: orEmpty(snap.PartitionColumns()),
		Configuration: snap.Configuration(), NumFiles: snap.NumFiles(), SizeBytes: snap.SizeBytes(),
		ReaderRequirements: readerRequirements(pr),
	}
	if out.Configuration == nil {
		out.Configuration = map[string]string{}
	}
	out.UncountedFiles = []UncountedFile{}
	for _, f := range snap.Files() {
		if dv := f.DeletionVector; dv != nil {
			out.DeletionVectors.Files++
			out.DeletionVectors.DeletedRows += dv.Cardinality
		}
		n, err := delta.FileRowCount(ctx, snap.Store(), f)
		if err != nil {
			if ctx.Err() != nil {
				return TableDescription{}, err
			}
			out.UncountedFiles = append(out.UncountedFiles, UncountedFile{Path: f.Path, SizeBytes: f.Size, Problem: FileProblem(err), Error: err.Error()})
			continue
		}
		out.RecordsCounted += n
	}
	if len(out.UncountedFiles) == 0 {
		out.NumRecords = &out.RecordsCounted
	}
	if cp := snap.CheckpointVersion(); cp >= 0 {
		out.LastCheckpoint = &cp
	}
	if md.CreatedTime != nil {
		out.CreatedTime = time.UnixMilli(*md.CreatedTime).UTC().Format(time.RFC3339Nano)
	}
	return out, nil
}

// FileProblem says why a data file could not be read: "missing" or
// "unreadable".
func FileProblem(err error) string {
	if errors.Is(err, objstore.ErrNotExist) {
		return "missing"
	}
	return "unreadable"
}

// readerFeatureNames are how Describe names the reader features it
// explains; others go by their protocol name.
var readerFeatureNames = map[string]string{
	"deletionVectors": "deletion vector",
	"columnMapping":   "column mapping",
	"timestampNtz":    "timestamp without time zone",
	"v2Checkpoint":    "V2 checkpoint",
	"typeWidening":    "type widening",
}

// readerRequirements lists the reader features of pr: those named by a
// (3,7) protocol, or the one reader version 2 implies (PROTOCOL.md "Table
// Features": column mapping). An engine without one of them must refuse
// the table; for deletion vectors, one that ignored them would return
// deleted rows.
func readerRequirements(pr delta.Protocol) []ReaderRequirement {
	features := pr.ReaderFeatures
	if len(features) == 0 && pr.MinReaderVersion == 2 {
		features = []string{"columnMapping"}
	}
	out := []ReaderRequirement{}
	for _, f := range features {
		name := readerFeatureNames[f]
		if name == "" {
			name = f
		}
		out = append(out, ReaderRequirement{Feature: f, Note: "engines without " + name + " support cannot read this table"})
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
