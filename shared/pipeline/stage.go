package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"io"
	"strings"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// StageResult says what Stage did with a file.
type StageResult struct {
	File        datastream.SourceFile
	Table       string
	Events      int64
	Skipped     string // why the file was ignored ("" when not)
	Duplicate   bool   // already registered: a re-delivered notification
	Quarantined string // why the file was quarantined ("" when not)
}

// manifest describes a staged file; it sits beside the staged Parquet file
// so a staged file is self-describing (schema, key, source).
type manifest struct {
	Table       string                `json:"table"`
	Key         []string              `json:"key,omitempty"`
	Schema      string                `json:"schema"` // history schemaString of the rows
	Add         delta.Add             `json:"add"`
	Events      int64                 `json:"events"`
	Source      datastream.SourceFile `json:"source"`
	MinSourceTS value.Micros          `json:"min_source_ts"`
	MaxSourceTS value.Micros          `json:"max_source_ts"`
	// Untyped lists JSON columns the table does not know yet and that hold
	// only nulls in this file: their type (string) is a guess, so the merge
	// lets another file's values decide it instead of calling it a conflict.
	Untyped []string `json:"untyped,omitempty"`
	// MaxOrder is the greatest ordering key of the file's events, which
	// decides the batch schema in schema mode overwrite without reading
	// the staged file again. Manifests staged before it existed lack it.
	MaxOrder []byte `json:"max_order,omitempty"`
}

// Stage decodes one Datastream file, writes its events as a staged Parquet
// file in the lake, registers it for its table and wakes the table's merge.
// It is idempotent per (bucket, name, generation). A permanently bad file is
// quarantined with the reason and Stage returns a result, not an error; an
// error means a transient failure worth retrying.
func (p *Pipeline) Stage(ctx context.Context, f datastream.SourceFile) (StageResult, error) {
	res := StageResult{File: f}
	if reason, skip := datastream.Skip(f); skip {
		res.Skipped = reason
		return res, nil
	}
	if !p.Config.IsDataFile(f.Name) {
		res.Skipped = "extension not in the configured data file extensions"
		return res, nil
	}
	id := coord.FileID(f.Bucket, f.Name, f.Generation)
	if rec, err := p.Coord.File(ctx, id); err == nil && rec.State != coord.StateQuarantined {
		res.Duplicate, res.Table, res.Events = true, rec.Table, rec.Events
		return res, nil
	} else if err != nil && !errors.Is(err, coord.ErrNotFound) {
		return res, fmt.Errorf("stage %s: look up registry: %w", f.Name, err)
	}
	log := p.log().With("file", f.Name, "generation", f.Generation)

	src, err := p.Sources.Bucket(ctx, f.Bucket)
	if err != nil {
		return res, fmt.Errorf("stage %s: open bucket %q: %w", f.Name, f.Bucket, err)
	}
	r, err := src.NewReader(ctx, f.Name, 0, -1)
	if err != nil {
		if errors.Is(err, objstore.ErrNotExist) {
			res.Skipped = "object no longer exists"
			return res, nil
		}
		return res, fmt.Errorf("stage %s: open: %w", f.Name, err)
	}
	defer r.Close()

	staged, table, err := p.decode(ctx, r, f, id)
	var tid string
	if staged != nil {
		tid = staged.Table
	} else {
		tid = table
	}
	if err != nil {
		if !isPermanent(err) {
			return res, fmt.Errorf("stage %s: %w", f.Name, err)
		}
		res.Quarantined = err.Error()
		res.Table = tid
		if _, qerr := p.Coord.Quarantine(ctx, coord.FileRecord{ID: id, Table: tableOrUnknown(tid), Bucket: f.Bucket, Name: f.Name, Generation: f.Generation, Size: f.Size, SourceBytes: max(f.Size, 0), Record: recordOf(err)}, err.Error()); qerr != nil {
			return res, fmt.Errorf("stage %s: quarantine: %w", f.Name, qerr)
		}
		log.Warn("file quarantined", "event", "quarantined", "table", tid, "reason", err.Error())
		return res, nil
	}
	if staged == nil { // a file without events
		res.Skipped = "file holds no events"
		return res, nil
	}
	res.Table, res.Events = staged.Table, staged.Events
	if !p.Config.Selected(staged.Table) {
		res.Skipped = "table " + staged.Table + " is excluded by configuration"
		return res, nil
	}
	rec, created, err := p.Coord.RegisterFile(ctx, coord.FileRecord{
		ID: id, Table: staged.Table, Bucket: f.Bucket, Name: f.Name, Generation: f.Generation,
		Size: staged.Add.Size, SourceBytes: max(f.Size, 0), StagedPath: stagingDir(staged.Table) + "/" + id + ".json", Events: staged.Events,
		MinSourceTime: staged.MinSourceTS.Time(), MaxSourceTime: staged.MaxSourceTS.Time(),
	})
	if err != nil {
		return res, fmt.Errorf("stage %s: register: %w", f.Name, err)
	}
	res.Duplicate = !created
	log.Info("file staged", "event", "staged", "table", rec.Table, "events", staged.Events, "arrival", rec.ArrivalSeq)
	if p.Waker != nil {
		if err := p.Waker.Wake(ctx, staged.Table); err != nil {
			// The file is registered: the next wake-up or the scheduled
			// maintenance merges it, so this is not worth a retry storm.
			log.Warn("wake-up failed; the file waits for the next merge", "table", staged.Table, "error", err)
		}
	}
	return res, nil
}

func tableOrUnknown(t string) string {
	if t == "" {
		return "_unknown._unknown"
	}
	return t
}

// permanentError wraps a cause that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

func isPermanent(err error) bool {
	var pe permanentError
	return errors.As(err, &pe) || errors.Is(err, datastream.ErrBadFile) || errors.Is(err, datastream.ErrBadRecord) || errors.Is(err, cdc.ErrSchemaConflict)
}

func recordOf(err error) string {
	var re *datastream.RecordError
	if errors.As(err, &re) {
		switch {
		case re.Line > 0:
			return fmt.Sprintf("line %d", re.Line)
		case re.Record > 0 && re.Block > 0:
			return fmt.Sprintf("block %d record %d", re.Block, re.Record)
		case re.Record > 0:
			return fmt.Sprintf("record %d", re.Record)
		}
	}
	return ""
}

// decode reads every event of the file, checks it (one table per file, a
// consistent schema) and writes the staged Parquet file and its manifest.
// It buffers the file's events: a Datastream file is bounded by the
// stream's rotation size, the staged schema is the union of the records'
// schemas, known only at the end, and a JSON file's column types depend on
// all its values. JSON events are typed by datastream.UnifyJSON against the
// table's current schema, so a column keeps the table's type and a file
// whose first value of a column is null does not change the column's type;
// Avro events keep the types of their schema.
func (p *Pipeline) decode(ctx context.Context, r io.Reader, f datastream.SourceFile, id string) (*manifest, string, error) {
	opts := datastream.Options{File: f, Logger: p.log(), PrimaryKeys: map[string][]string{}}
	for tid, tc := range p.Config.Tables {
		if len(tc.PrimaryKey) > 0 {
			opts.PrimaryKeys[tid] = tc.PrimaryKey
		}
	}
	d, err := datastream.Decode(ctx, r, f.Name, opts)
	if err != nil {
		return nil, "", err
	}
	defer d.Close()
	var events datastream.Events
	derr := d.AppendTo(&events)
	// Check the events decoded before any decode error first: a record of
	// another table before a bad record is the error decoding in order
	// meets first.
	var m *manifest
	for _, ev := range events.All() {
		tid := ev.Table.String()
		if m == nil {
			m = &manifest{Table: tid, Source: f, MinSourceTS: ev.SourceTimestamp, MaxSourceTS: ev.SourceTimestamp}
		}
		if tid != m.Table {
			return nil, m.Table, permanentError{fmt.Errorf("%s: record %d: table %s differs from the file's first table %s", f.Name, ev.Meta.Record, tid, m.Table)}
		}
		m.MinSourceTS = min(m.MinSourceTS, ev.SourceTimestamp)
		m.MaxSourceTS = max(m.MaxSourceTS, ev.SourceTimestamp)
		if bytes.Compare(ev.Order.Bytes, m.MaxOrder) > 0 {
			m.MaxOrder = ev.Order.Bytes
		}
		m.Events++
	}
	if m != nil {
		m.MaxOrder = bytes.Clone(m.MaxOrder) // not the decoder's arena
	}
	if derr != nil {
		if m != nil {
			return nil, m.Table, derr
		}
		return nil, "", derr
	}
	if m == nil {
		return nil, "", nil
	}
	if d.Format() == datastream.FormatJSONL {
		known, err := p.sourceSchema(ctx, m.Table)
		if err != nil {
			return nil, m.Table, err
		}
		// Ignored columns are dropped below whatever they hold, so their
		// values must not be held to the table's type.
		known = dropColumns(known, p.Config.Table(m.Table).IgnoreColumns)
		if p.Config.Table(m.Table).SchemaMode == config.SchemaOverwrite {
			// The file's own values decide its schema: the source's as of
			// the file's changes. The merge lets it replace the table's
			// only when the file holds the newest change (files arrive in
			// any order).
			known = value.StructType{}
		}
		// A value that does not fit the table's type is a bad record naming
		// the file, line and column: the file is quarantined.
		unified, err := events.UnifyJSON(known)
		if err != nil {
			return nil, m.Table, err
		}
		m.Untyped = untypedColumns(&events, unified, known)
	}
	if first := events.At(0); !first.HistoryOnly {
		m.Key = first.KeyNames
	}
	var (
		schema  value.StructType
		schemas []value.StructType
		rowSch  []int // index into schemas per event
	)
	for _, ev := range events.All() {
		if len(schemas) == 0 {
			schema = ev.Schema
		}
		if len(schemas) == 0 || !value.Equal(schemas[len(schemas)-1], ev.Schema) {
			merged, _, err := cdc.MergeSchemas(schema, ev.Schema)
			if err != nil {
				return nil, m.Table, permanentError{fmt.Errorf("%s: record %d: %w", f.Name, ev.Meta.Record, err)}
			}
			schema = merged
			schemas = append(schemas, ev.Schema)
		}
		rowSch = append(rowSch, len(schemas)-1)
	}
	schema = dropColumns(schema, p.Config.Table(m.Table).IgnoreColumns)
	if err := cdc.ValidateSource(schema); err != nil {
		return nil, m.Table, permanentError{fmt.Errorf("%s: %w", f.Name, err)}
	}
	hs := cdc.HistorySchema(schema)
	w, err := delta.NewFileWriter(ctx, p.Lake, delta.WriteOptions{Schema: hs, Dir: stagingDir(m.Table), FileName: id + "-" + uuid.NewString()[:8] + ".parquet", DataChange: true})
	if err != nil {
		return nil, m.Table, err
	}
	from := make([]value.StructType, len(schemas))
	for i, s := range schemas {
		from[i] = cdc.HistorySchema(s)
	}
	for i, ev := range events.All() {
		row, err := cdc.Conform(cdc.HistoryRow(*ev), from[rowSch[i]], hs)
		if err != nil {
			w.Abort()
			return nil, m.Table, permanentError{fmt.Errorf("%s: record %d: %w", f.Name, ev.Meta.Record, err)}
		}
		if err := w.Write(row); err != nil {
			w.Abort()
			return nil, m.Table, err
		}
		*ev = datastream.Event{} // written: let it go
	}
	add, err := w.Close(ctx)
	if err != nil {
		return nil, m.Table, err
	}
	m.Add, m.Schema = add, hs.SchemaString()
	b, err := json.Marshal(m)
	if err != nil {
		return nil, m.Table, err
	}
	if _, err := p.Lake.Write(ctx, stagingDir(m.Table)+"/"+id+".json", bytes.NewReader(b), objstore.WriteOptions{ContentType: "application/json"}); err != nil {
		return nil, m.Table, fmt.Errorf("write staged manifest: %w", err)
	}
	return m, m.Table, nil
}

// sourceSchema is the table's current source schema (the current-state
// table's columns without the metadata columns), which types the JSON files
// staged for it; it is empty while the table does not exist.
func (p *Pipeline) sourceSchema(ctx context.Context, table string) (value.StructType, error) {
	tabs, err := p.Tables(table)
	if err != nil {
		return value.StructType{}, permanentError{fmt.Errorf("table %s: %w", table, err)}
	}
	snap, err := delta.Open(tabs.State).Snapshot(ctx)
	if errors.Is(err, delta.ErrNotATable) {
		return value.StructType{}, nil
	}
	if err != nil {
		return value.StructType{}, fmt.Errorf("read the schema of table %s: %w", table, err)
	}
	return cdc.SourceSchema(snap.Schema()), nil
}

// readStaged loads a staged file's manifest.
func (p *Pipeline) readStaged(ctx context.Context, path string) (*manifest, error) {
	b, err := objstore.ReadAll(ctx, p.Lake, path)
	if err != nil {
		return nil, fmt.Errorf("read staged manifest %s: %w", path, err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse staged manifest %s: %w", path, err)
	}
	return &m, nil
}

// untypedColumns returns the columns of a unified JSON schema that the
// table does not know and that are null in every event.
func untypedColumns(events *datastream.Events, unified, known value.StructType) []string {
	var out []string
	for i, f := range unified.Fields {
		if _, ok := known.Field(f.Name); ok {
			continue
		}
		typed := false
		for _, ev := range events.All() {
			if i < len(ev.Row) && ev.Row[i] != nil {
				typed = true
				break
			}
		}
		if !typed {
			out = append(out, f.Name)
		}
	}
	return out
}

// dropColumns removes the named columns (case-insensitive) from a schema.
func dropColumns(st value.StructType, names []string) value.StructType {
	if len(names) == 0 {
		return st
	}
	drop := map[string]bool{}
	for _, c := range names {
		drop[strings.ToLower(c)] = true
	}
	var out value.StructType
	for _, f := range st.Fields {
		if !drop[strings.ToLower(f.Name)] {
			out.Fields = append(out.Fields, f)
		}
	}
	return out
}
