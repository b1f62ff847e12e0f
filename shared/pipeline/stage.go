package pipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/google/uuid"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/opcount"
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
	// Ops counts the billable calls staging the file made (see package
	// opcount), its wake-up included.
	Ops opcount.Counts
}

// manifest describes a staged file; it sits beside the staged Parquet
// files so a staged file is self-describing (schema, key, source). A file
// is staged in parts of at most the configured events each, so staging and
// merging hold a part, not a file of any size; each part has its own
// schema (the union of its events').
type manifest struct {
	Table       string                `json:"table"`
	Key         []string              `json:"key,omitempty"`
	Events      int64                 `json:"events"`
	Source      datastream.SourceFile `json:"source"`
	MinSourceTS value.Micros          `json:"min_source_ts"`
	MaxSourceTS value.Micros          `json:"max_source_ts"`
	// MaxOrder is the greatest ordering key of the file's events.
	// Manifests staged before it existed lack it.
	MaxOrder []byte `json:"max_order,omitempty"`
	// Parts are the staged Parquet files, in file order.
	Parts []stagedPart `json:"parts,omitempty"`

	// Schema, Add and Untyped describe the one staged Parquet file of a
	// manifest written before files were staged in parts; readStaged turns
	// them into Parts[0]. A single-part file still writes them, so that a
	// merge of the earlier release reads what this one stages.
	Schema  string    `json:"schema,omitempty"`
	Add     delta.Add `json:"add,omitzero"`
	Untyped []string  `json:"untyped,omitempty"`
}

// stagedBytes is the size of the manifest's staged Parquet files.
func (m *manifest) stagedBytes() int64 {
	var n int64
	for _, part := range m.Parts {
		n += part.Add.Size
	}
	return n
}

// stagedPart is one staged Parquet file of a manifest.
type stagedPart struct {
	Schema string    `json:"schema"` // history schemaString of the rows
	Add    delta.Add `json:"add"`
	Events int64     `json:"events"`
	// Untyped lists JSON columns the table does not know yet and that hold
	// only nulls in this part: their type (string) is a guess, so the merge
	// lets another part's values decide it instead of calling it a conflict.
	Untyped []string `json:"untyped,omitempty"`
	// MemBytes estimates the memory the part's events take (eventBytes),
	// which bounds a merge step beside their number. Parts staged before
	// it existed lack it.
	MemBytes int64 `json:"mem_bytes,omitempty"`
	// MaxOrder is the greatest ordering key of the part's events, which
	// decides the batch schema in schema mode overwrite without reading
	// the staged file again.
	MaxOrder []byte `json:"max_order,omitempty"`
	// KeyCode, when it is cdc.RangeCodeVersion, says that the part's rows
	// are sorted by key (stably: a key's events keep their file order) in
	// row groups of partGroupRows rows, and that KeySample holds the range
	// codes (cdc.AppendRangeCode) of its rows 0, KeyEvery, 2*KeyEvery...
	// and KeyMax that of its last row. A merge splits a large batch into
	// key ranges by them (planSteps). Parts staged before, or of a table
	// without a key, lack them.
	KeyCode   int      `json:"key_code,omitempty"`
	KeyEvery  int64    `json:"key_every,omitempty"`
	KeySample [][]byte `json:"key_sample,omitempty"`
	KeyMax    []byte   `json:"key_max,omitempty"`
	// KeyHashes names the object that holds the cdc.KeyOrderHash of each
	// of the part's events (of a table with a key), as sorted
	// little-endian uint64s: a merge tells from them, without reading the
	// rows, whether the part's events are new to its batch, and so
	// whether a dated part can be the history's file as it is.
	KeyHashes string `json:"key_hashes,omitempty"`
}

// keyHashesSuffix ends the name of a part's KeyHashes object.
const keyHashesSuffix = ".keys"

// readKeyHashes reads a part's KeyHashes; ok is false when it has none,
// or not one per event.
func (p *Pipeline) readKeyHashes(ctx context.Context, part stagedPart) (hashes []uint64, ok bool, err error) {
	if part.KeyHashes == "" {
		return nil, false, nil
	}
	b, err := objstore.ReadAll(ctx, p.Lake, part.KeyHashes)
	if err != nil {
		return nil, false, fmt.Errorf("read the key hashes %s: %w", part.KeyHashes, err)
	}
	if int64(len(b)) != 8*part.Events {
		return nil, false, nil
	}
	hashes = make([]uint64, part.Events)
	for i := range hashes {
		hashes[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return hashes, slices.IsSorted(hashes), nil
}

// objectNames are the objects of a staged part: its Parquet file and its
// key hashes.
func (part stagedPart) objectNames() []string {
	var names []string
	if name, err := part.Add.ObjectName(); err == nil {
		names = append(names, name)
	}
	if part.KeyHashes != "" {
		names = append(names, part.KeyHashes)
	}
	return names
}

// keySorted reports whether the part's rows are sorted by key with a
// sample of range codes this release reads.
func (part stagedPart) keySorted() bool {
	return part.KeyCode == cdc.RangeCodeVersion && len(part.KeySample) > 0 && part.KeyEvery > 0
}

// stagedRowGroupRows is the row group size of key-sorted staged parts:
// a merge step that reads one key range of a part reads the row groups
// whose key bounds overlap the range, so the smaller they are, the fewer
// rows of other ranges a step decodes to drop (at most two row groups per
// part and step), at the price of a larger footer.
const stagedRowGroupRows = 2048

// smallGroupRows is the row group size of a key-sorted part too small for
// the history to take as a file (historyCopyMinEvents). A batch of many
// such parts (a backlog of small files) is merged in steps that each take
// a few hundred events of every part, and a step decodes whole row
// groups: with stagedRowGroupRows, each step decoded most of every part.
// Smaller groups would cost a CDC batch of one step, which reads its small
// parts whole, more page headers and chunk metadata.
const smallGroupRows = 512

// partGroupRows is the row group size of a key-sorted part of n events.
// The parts the history takes keep the larger row groups its readers scan.
func (p *Pipeline) partGroupRows(n int64) int64 {
	if p.stagedGroupRows > 0 {
		return int64(p.stagedGroupRows)
	}
	if n >= orConst(p.historyCopyEvents, historyCopyMinEvents) {
		return stagedRowGroupRows
	}
	return smallGroupRows
}

// keySampleSize is about how many range codes a part's manifest records.
const keySampleSize = 256

// metadata describes a staged part as the Delta metadata its file is read
// with: an unpartitioned file of the part's history schema.
func (part stagedPart) metadata() delta.Metadata {
	md := delta.Metadata{SchemaString: part.Schema, Format: delta.Format{Provider: "parquet"}, PartitionColumns: []string{}, Configuration: map[string]string{}}
	if part.dated() {
		md.PartitionColumns = []string{cdc.ColSourceDate}
	}
	return md
}

// dated reports whether the part's rows are of one source date, which its
// add's partition value holds instead of a column of the file: the file
// is then written as the history table writes its files (see
// cdc.HistoryFile).
func (part stagedPart) dated() bool {
	_, ok := part.Add.PartitionValues[cdc.ColSourceDate]
	return ok && len(part.Add.PartitionValues) == 1
}

// Stage decodes one Datastream file, writes its events as a staged Parquet
// file in the lake, registers it for its table and wakes the table's merge.
// It is idempotent per (bucket, name, generation). A permanently bad file is
// quarantined with the reason and Stage returns a result, not an error; an
// error means a transient failure worth retrying.
func (p *Pipeline) Stage(ctx context.Context, f datastream.SourceFile) (res StageResult, err error) {
	res = StageResult{File: f}
	ctx, ops := opcount.Start(ctx)
	defer func() { res.Ops = ops.Counts() }()
	if reason, skip := datastream.Skip(f); skip {
		res.Skipped = reason
		return res, nil
	}
	if !p.Config.IsDataFile(f.Name) {
		res.Skipped = "extension not in the configured data file extensions"
		return res, nil
	}
	id := coord.FileID(f.Bucket, f.Name, f.Generation)
	if rec, err := p.Registry.File(ctx, id); err == nil && rec.State != coord.StateQuarantined && rec.State != coord.StateSkipped {
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
		if _, qerr := p.Registry.Quarantine(ctx, coord.FileRecord{ID: id, Table: tableOrUnknown(tid), Bucket: f.Bucket, Name: f.Name, Generation: f.Generation, Size: f.Size, SourceBytes: max(f.Size, 0), SourceCreated: f.Created, Record: recordOf(err)}, err.Error()); qerr != nil {
			return res, fmt.Errorf("stage %s: quarantine: %w", f.Name, qerr)
		}
		log.Warn("file quarantined", "event", "quarantined", "table", tableOrUnknown(tid), "reason", err.Error())
		return res, nil
	}
	if staged == nil { // a file without events
		res.Skipped = "file holds no events"
		return res, p.skip(ctx, f, id, UnknownTable, res.Skipped)
	}
	res.Table, res.Events = staged.Table, staged.Events
	if !p.Config.Selected(staged.Table) {
		res.Skipped = "table " + staged.Table + " is excluded by configuration"
		return res, p.skip(ctx, f, id, staged.Table, res.Skipped)
	}
	rec, created, err := p.Registry.RegisterFile(ctx, coord.FileRecord{
		ID: id, Table: staged.Table, Bucket: f.Bucket, Name: f.Name, Generation: f.Generation,
		Size: staged.stagedBytes(), SourceBytes: max(f.Size, 0), StagedPath: stagingDir(staged.Table) + "/" + id + ".json", Events: staged.Events,
		MinSourceTime: staged.MinSourceTS.Time(), MaxSourceTime: staged.MaxSourceTS.Time(), SourceCreated: f.Created,
	})
	if err != nil {
		return res, fmt.Errorf("stage %s: register: %w", f.Name, err)
	}
	res.Duplicate = !created
	if p.Waker != nil {
		if err := p.Waker.Wake(ctx, staged.Table); err != nil {
			// The file is registered: the next wake-up or the scheduled
			// maintenance merges it, so this is not worth a retry storm.
			log.Warn("wake-up failed; the file waits for the next merge", "table", staged.Table, "error", err)
		}
	}
	// The counts are the file's whole staging, its wake-up included.
	attrs := append([]any{"table", rec.Table, "events", staged.Events, "arrival", rec.ArrivalSeq, "parts", len(staged.Parts)}, ops.Counts().Attrs()...)
	if !created {
		// Another delivery of the notification registered it first: one
		// "staged" line per file, which the staged-files metric counts.
		log.Info("file already staged by another delivery", append([]any{"event", "staged_again"}, attrs...)...)
	} else {
		log.Info("file staged", append([]any{"event", "staged"}, attrs...)...)
	}
	return res, nil
}

// UnknownTable is the table id under which a file is quarantined when no
// table could be read from it (every caller shows it by this one label).
const UnknownTable = "_unknown._unknown"

// skip records a file staging read and found nothing to merge in, so that
// the reconcile knows it and does not hand it over again (Registry.Skip).
func (p *Pipeline) skip(ctx context.Context, f datastream.SourceFile, id, tableID, reason string) error {
	if _, err := p.Registry.Skip(ctx, coord.FileRecord{ID: id, Table: tableID, Bucket: f.Bucket, Name: f.Name,
		Generation: f.Generation, Size: f.Size, SourceBytes: max(f.Size, 0), SourceCreated: f.Created}, reason); err != nil {
		return fmt.Errorf("stage %s: record it skipped: %w", f.Name, err)
	}
	return nil
}

// tableOrUnknown is the table id t, or UnknownTable when it is empty.
func tableOrUnknown(tableID string) string {
	if tableID == "" {
		return UnknownTable
	}
	return tableID
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

// decode reads the file's events in parts of at most the configured
// events (Config.MaxEvents), checks them (one table per file, a consistent
// schema) and writes each part as a staged Parquet file, then the manifest
// naming them. Memory holds one part, whatever the file's size: a part's
// staged schema is the union of its events' schemas, known only at its end,
// and a JSON part's column types depend on all its values. JSON events are
// typed by datastream.UnifyJSON against the table's current schema, so a
// column keeps the table's type and a part whose first value of a column is
// null does not change the column's type; Avro events keep the types of
// their schema. On a bad record the parts already written are deleted: the
// file is quarantined whole.
func (p *Pipeline) decode(ctx context.Context, r io.Reader, f datastream.SourceFile, id string) (*manifest, string, error) {
	src := p.Config.SourceOf(f.Bucket, f.Name)
	opts := datastream.Options{File: f, Logger: p.log(), PrimaryKeys: map[string][]string{}, MaxRecordBytes: p.Config.MaxRecordBytes(),
		Namespace: src.Namespace, SQLServerDatabase: src.SQLServerTableID == config.SQLServerDatabase}
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
	st := &stager{p: p, f: f, id: id, format: d.Format()}
	m, err := st.run(ctx, d, int(p.Config.MaxEvents()))
	if err != nil {
		st.discard(ctx)
		if m != nil {
			return nil, m.Table, err
		}
		return nil, "", err
	}
	if m == nil {
		return nil, "", nil
	}
	if len(m.Parts) == 1 { // readable by a merge that predates parts
		m.Schema, m.Add, m.Untyped = m.Parts[0].Schema, m.Parts[0].Add, m.Parts[0].Untyped
	}
	b, err := json.Marshal(m)
	if err != nil {
		st.discard(ctx)
		return nil, m.Table, err
	}
	if _, err := p.Lake.Write(ctx, stagingDir(m.Table)+"/"+id+".json", bytes.NewReader(b), objstore.WriteOptions{ContentType: "application/json"}); err != nil {
		st.discard(ctx)
		return nil, m.Table, fmt.Errorf("write staged manifest: %w", err)
	}
	return m, m.Table, nil
}

// stager stages one file part by part.
type stager struct {
	p      *Pipeline
	f      datastream.SourceFile
	id     string
	format datastream.Format
	m      *manifest
	table  datastream.TableID // the file's table, once an event named it
	known  *value.StructType  // the table's source schema, read once (JSON)
	tc     config.TableConfig

	// claimed: the file's stream feeds its table (claimSource).
	claimed bool
}

// partMemoryBytes ends a part before batch_max_events when its events'
// estimated size (eventBytes) reaches it: a table of wide rows (large
// text or binary columns) must not make a part of many events hold
// gigabytes. Steps of a merge are bounded by the same estimate.
const partMemoryBytes = 128 << 20

// orConst is v when set (a test's override), else c.
func orConst(v, c int64) int64 {
	if v > 0 {
		return v
	}
	return c
}

// partProbeEvents is the most events decoded between two looks at a
// part's estimated size.
const partProbeEvents = 4096

// eventBytes estimates the memory an event takes while staged or merged:
// its fixed part and its variable-length values.
func eventBytes(ev *datastream.Event) int64 {
	n := int64(512 + 16*len(ev.Row))
	for _, v := range ev.Row {
		switch v := v.(type) {
		case string:
			n += int64(len(v))
		case []byte:
			n += int64(len(v))
		}
	}
	return n
}

// run decodes and stages every part; the manifest is nil for a file
// without events, and set (for its table) with an error once one is known.
// When the process has the memory for it (stagesAhead), a part is decoded
// while the one before it is written: decoding runs on all cores, writing
// a part on one, and a file of many parts (a large Datastream file) is
// otherwise staged with one core idle half the time.
func (s *stager) run(ctx context.Context, d *datastream.Reader, partEvents int) (*manifest, error) {
	ahead := s.p.stagesAhead()
	next := s.decodePart(d, partEvents)
	for {
		part := next
		// Check the events decoded before any decode error first: a
		// record of another table before a bad record is the error
		// decoding in order meets first.
		if err := s.check(&part.events); err != nil {
			return s.m, err
		}
		if part.err != nil {
			return s.m, part.err
		}
		if s.m != nil && !s.claimed {
			// Before a first object is written: a file of another
			// stream leaves nothing staged.
			if err := s.p.claimSource(ctx, s.f, s.table); err != nil {
				return s.m, err
			}
			s.claimed = true
		}
		var decoded chan decodedPart
		if ahead && part.more {
			decoded = make(chan decodedPart, 1)
			go func() { decoded <- s.decodePart(d, partEvents) }()
		}
		if part.events.Len() > 0 {
			if err := s.stagePart(ctx, &part.events, part.mem); err != nil {
				if decoded != nil {
					<-decoded // the reader is the caller's again
				}
				return s.m, err
			}
		}
		switch {
		case !part.more:
			return s.m, nil
		case decoded != nil:
			next = <-decoded
		default:
			next = s.decodePart(d, partEvents)
		}
	}
}

// decodedPart is the events of one part, as decodePart left them.
type decodedPart struct {
	events datastream.Events
	mem    int64 // their estimated memory (eventBytes)
	more   bool  // the file has events past them
	err    error // a decode error met after them
}

// decodePart decodes the file's next part: up to partEvents events, or
// fewer when their estimated memory reaches partMemoryBytes. It uses only
// d (and the stager's settings), so that it can run beside stagePart.
func (s *stager) decodePart(d *datastream.Reader, partEvents int) decodedPart {
	var part decodedPart
	part.more = true
	limit := orConst(s.p.partMemory, partMemoryBytes)
	for part.more && part.err == nil && part.events.Len() < partEvents && part.mem < limit {
		// Decode as many events as the room left holds at the size seen
		// so far (one to start with: a record may be as large as
		// max_record_bytes).
		from, probe := part.events.Len(), 1
		if from > 0 {
			probe = int(min(partProbeEvents, max(1, (limit-part.mem)*int64(from)/part.mem)))
		}
		part.more, part.err = d.AppendUpTo(&part.events, min(partEvents, from+probe))
		for i := from; i < part.events.Len(); i++ {
			part.mem += eventBytes(part.events.At(i))
		}
	}
	return part
}

// stagingAheadShare is how many parts' bounds of memory (partMemoryBytes)
// the process's memory limit must hold for staging to decode a part while
// it writes the one before: each part's events, the arrays a part is
// written through, their memory beyond the estimate, and room for the
// collector. A 1 GiB function's limit (819 MiB) holds it; a 512 MiB
// function's (409 MiB) stages one part at a time, as a run without a
// limit does.
const stagingAheadShare = 6

// stagesAhead says whether staging decodes a file's next part while it
// writes one (see stagingAheadShare).
func (p *Pipeline) stagesAhead() bool {
	limit := p.memoryLimit
	if limit == 0 {
		limit = debug.SetMemoryLimit(-1)
	}
	return limit > 0 && limit != math.MaxInt64 && limit >= stagingAheadShare*orConst(p.partMemory, partMemoryBytes)
}

// check verifies that a part's events belong to the file's table and
// sums them into the manifest.
func (s *stager) check(events *datastream.Events) error {
	f := s.f
	var maxOrder []byte // the decoder's memory: cloned once, below
	defer func() {
		if s.m != nil && bytes.Compare(maxOrder, s.m.MaxOrder) > 0 {
			s.m.MaxOrder = bytes.Clone(maxOrder)
		}
	}()
	for _, ev := range events.All() {
		m := s.m
		if m == nil {
			tid := ev.Table.String()
			m = &manifest{Table: tid, Source: f, MinSourceTS: ev.SourceTimestamp, MaxSourceTS: ev.SourceTimestamp}
			if !ev.HistoryOnly {
				m.Key = ev.KeyNames
			}
			s.m, s.tc, s.table = m, s.p.Config.Table(tid), ev.Table
		}
		// The id as decoded, not its text: one string built per event was
		// an allocation per event.
		if ev.Table != s.table {
			return permanentError{fmt.Errorf("%s: record %d: table %s differs from the file's first table %s", f.Name, ev.Meta.Record, ev.Table, m.Table)}
		}
		m.MinSourceTS = min(m.MinSourceTS, ev.SourceTimestamp)
		m.MaxSourceTS = max(m.MaxSourceTS, ev.SourceTimestamp)
		if bytes.Compare(ev.Order.Bytes, maxOrder) > 0 {
			maxOrder = ev.Order.Bytes
		}
		m.Events++
	}
	return nil
}

// stagePart writes one part's events as a staged Parquet file: their
// schemas unified into one, their rows in key order, and beside the file
// the hashes of their keys.
func (s *stager) stagePart(ctx context.Context, events *datastream.Events, mem int64) error {
	m := s.m
	part := stagedPart{Events: int64(events.Len()), MemBytes: mem}
	if s.format == datastream.FormatJSONL {
		untyped, err := s.typeJSON(ctx, events)
		if err != nil {
			return err
		}
		part.Untyped = untyped
	}
	ps, err := s.partSchema(events)
	if err != nil {
		return err
	}
	part.MaxOrder = ps.maxOrder
	base := fmt.Sprintf("%s-%s-%d", s.id, uuid.NewString()[:8], len(m.Parts))
	w, err := delta.NewFileWriter(ctx, s.p.Lake, s.writeOptions(base, ps, events.Len()))
	if err != nil {
		return err
	}
	rows := newPartRows(events, ps, s.f.Name)
	var keys *keyCodes
	if len(m.Key) > 0 {
		if keys, err = rows.codeKeys(m.Key); err != nil {
			w.Abort()
			return err
		}
	}
	order := keys.sorted(events.Len())
	// The key hashes are written while the part is: their object's sync
	// waits beside the part's encoding, not after the part's own sync.
	var hashes *keyHashesWrite
	if keys != nil {
		hashes = s.writeKeyHashes(ctx, stagingDir(m.Table)+"/"+base+keyHashesSuffix, part.sampleKeys(keys, order, events))
	}
	add, err := rows.write(ctx, w, order)
	if err != nil {
		_ = hashes.wait(ctx, true)
		return err
	}
	part.Add, part.Schema = add, ps.hs.SchemaString()
	if hashes != nil {
		if err := hashes.wait(ctx, false); err != nil {
			if name, nerr := add.ObjectName(); nerr == nil {
				_ = s.p.Lake.Delete(context.WithoutCancel(ctx), name)
			}
			return fmt.Errorf("write the key hashes of a staged part: %w", err)
		}
		part.KeyHashes = hashes.name
	}
	m.Parts = append(m.Parts, part)
	return nil
}

// typeJSON types a JSON part's payloads by the table's source schema,
// read once per file, and returns the columns it guessed the type of
// (untypedColumns).
func (s *stager) typeJSON(ctx context.Context, events *datastream.Events) ([]string, error) {
	if s.known == nil {
		known, err := s.p.sourceSchema(ctx, s.m.Table)
		if err != nil {
			return nil, err
		}
		// Ignored columns are dropped below whatever they hold, so
		// their values must not be held to the table's type.
		known = dropColumns(known, s.tc.IgnoreColumns)
		if s.tc.SchemaMode == config.SchemaOverwrite {
			// The file's own values decide its schema: the source's
			// as of the file's changes. The merge lets it replace the
			// table's only when the file holds the newest change
			// (files arrive in any order).
			known = value.StructType{}
		}
		s.known = &known
	}
	// A value that does not fit the table's type is a bad record
	// naming the file, line and column: the file is quarantined.
	unified, err := events.UnifyJSON(*s.known)
	if err != nil {
		return nil, err
	}
	return untypedColumns(events, unified, *s.known), nil
}

// partSchema is the schema of a part's rows, and what else one pass over
// its events finds.
type partSchema struct {
	source  value.StructType   // the part's source schema
	hs      value.StructType   // the history schema of the part's rows
	schemas []value.StructType // the events' schemas, each where it changes
	rowSch  []int              // index into schemas per event
	// The part's source dates: one date makes a dated part.
	firstDay, lastDay value.Days
	maxOrder          []byte // the greatest ordering key, cloned
}

// partSchema unifies the schemas of a part's events, less the table's
// ignored columns, into the history schema of its rows.
func (s *stager) partSchema(events *datastream.Events) (partSchema, error) {
	var schema value.StructType
	ps := partSchema{rowSch: make([]int, 0, events.Len())}
	for i, ev := range events.All() {
		day := value.DaysOf(ev.SourceTimestamp.Time())
		if i == 0 {
			ps.firstDay, ps.lastDay = day, day
		}
		ps.firstDay, ps.lastDay = min(ps.firstDay, day), max(ps.lastDay, day)
		if len(ps.schemas) == 0 {
			schema = ev.Schema
		}
		if len(ps.schemas) == 0 || !value.Equal(ps.schemas[len(ps.schemas)-1], ev.Schema) {
			merged, _, err := cdc.MergeSchemas(schema, ev.Schema)
			if err != nil {
				return partSchema{}, permanentError{fmt.Errorf("%s: record %d: %w", s.f.Name, ev.Meta.Record, err)}
			}
			schema = merged
			ps.schemas = append(ps.schemas, ev.Schema)
		}
		ps.rowSch = append(ps.rowSch, len(ps.schemas)-1)
		if bytes.Compare(ev.Order.Bytes, ps.maxOrder) > 0 {
			ps.maxOrder = ev.Order.Bytes
		}
	}
	ps.maxOrder = bytes.Clone(ps.maxOrder) // not the decoder's arena
	schema = dropColumns(schema, s.tc.IgnoreColumns)
	if err := cdc.ValidateSource(schema); err != nil {
		return partSchema{}, permanentError{fmt.Errorf("%s: %w", s.f.Name, err)}
	}
	ps.source, ps.hs = schema, cdc.HistorySchema(schema)
	return ps, nil
}

// writeOptions are those of a part of n rows named base.
func (s *stager) writeOptions(base string, ps partSchema, n int) delta.WriteOptions {
	wo := delta.WriteOptions{Schema: ps.hs, Dir: stagingDir(s.m.Table), FileName: base + ".snappy.parquet", DataChange: true, ValueArrays: &s.p.valueArrays, Configuration: cdc.HistoryStatsConfiguration(ps.source, s.m.Key)}
	if ps.firstDay == ps.lastDay && n > 0 {
		// As the history table writes its files: the date is the
		// partition's, not a column (cdc.HistoryFile).
		wo.PartitionColumns = []string{cdc.ColSourceDate}
		wo.PartitionValues = map[string]any{cdc.ColSourceDate: ps.firstDay}
	}
	if len(s.m.Key) > 0 {
		wo.RowGroupRows = s.p.partGroupRows(int64(n))
	}
	return wo
}

// partRows makes the history rows of a part's events in the part's
// schema. Rows are written in key order: the codes are taken in a first
// pass, and each row is built again when written, so that a part holds
// its events and their codes, not also every row.
type partRows struct {
	events *datastream.Events
	file   string // for errors
	hs     value.StructType
	rowSch []int              // index into from per event
	from   []value.StructType // the history schema of each event schema
	same   []bool             // rows of the part's schema as they are
	hist   *cdc.HistoryRows
	// Each row is taken (its key coded, or its values converted by the
	// writer) before the next is asked for: one row's array serves all.
	last []any
}

func newPartRows(events *datastream.Events, ps partSchema, file string) *partRows {
	r := &partRows{events: events, file: file, hs: ps.hs, rowSch: ps.rowSch,
		from: make([]value.StructType, len(ps.schemas)), same: make([]bool, len(ps.schemas)), hist: cdc.NewHistoryRows()}
	for i, sc := range ps.schemas {
		r.from[i] = cdc.HistorySchema(sc)
		r.same[i] = value.Equal(r.from[i], ps.hs)
	}
	return r
}

// row is the history row of event i, valid until the next call.
func (r *partRows) row(i int) ([]any, error) {
	ev := r.events.At(i)
	row := r.hist.RowInto(r.last, ev)
	r.last = row
	if r.same[r.rowSch[i]] {
		return row, nil
	}
	row, err := cdc.Conform(row, r.from[r.rowSch[i]], r.hs)
	if err != nil {
		return nil, permanentError{fmt.Errorf("%s: record %d: %w", r.file, ev.Meta.Record, err)}
	}
	return row, nil
}

// codeKeys takes the range code of each row's key; it returns nil when
// the part's schema lacks a key column.
func (r *partRows) codeKeys(key []string) (*keyCodes, error) {
	keyIdx, err := cdc.KeyIndexes(r.hs, key)
	if err != nil {
		return nil, nil
	}
	n := r.events.Len()
	keys := &keyCodes{idx: keyIdx, codeList: codeList{at: make([]int32, 1, n+1)}, rows: n}
	for i := range n {
		var err error
		if ev := r.events.At(i); r.same[r.rowSch[i]] {
			// The history row would be the metadata, then ev.Row.
			err = keys.add(ev.Row, len(r.hs.Fields)-len(ev.Row), r.hs)
		} else if row, rerr := r.row(i); rerr != nil {
			err = rerr
		} else {
			err = keys.add(row, 0, r.hs)
		}
		if err != nil {
			return nil, permanentError{fmt.Errorf("%s: record %d: %w", r.file, r.events.At(i).Meta.Record, err)}
		}
	}
	return keys, nil
}

// write writes the rows to w in order and closes it. The rows are made
// in the order the events were decoded, which is the order their values
// lie in memory, and written in key order (delta.FileWriter.WriteInOrder).
func (r *partRows) write(ctx context.Context, w *delta.FileWriter, order []int32) (delta.Add, error) {
	err := w.WriteInOrder(r.events.Len(), order, func(i int) ([]any, error) {
		row, err := r.row(i)
		// The row holds what the writer still needs of the event, and
		// only until it is converted: let the rest go.
		*r.events.At(i) = datastream.Event{}
		return row, err
	})
	if err != nil {
		w.Abort()
		return delta.Add{}, err
	}
	return w.Close(ctx)
}

// sampleKeys sets the part's key sample from its rows' codes in the
// order they are written, and returns the sorted KeyOrderHash of each
// event, as the KeyHashes object holds them.
func (part *stagedPart) sampleKeys(keys *keyCodes, order []int32, events *datastream.Events) []byte {
	n := len(order)
	part.KeyCode, part.KeyEvery = cdc.RangeCodeVersion, max(1, int64(n/keySampleSize))
	for j := int64(0); j < int64(n); j += part.KeyEvery {
		part.KeySample = append(part.KeySample, bytes.Clone(keys.code(order[j])))
	}
	part.KeyMax = bytes.Clone(keys.code(order[n-1]))
	sums := make([]uint64, n)
	for i := range sums {
		sums[i] = cdc.KeyOrderHash(keys.code(int32(i)), events.At(i).Order.Bytes)
	}
	slices.Sort(sums)
	hashes := make([]byte, 0, 8*n)
	for _, h := range sums {
		hashes = binary.LittleEndian.AppendUint64(hashes, h)
	}
	return hashes
}

// keyHashesWrite is the write of a part's KeyHashes object, under way
// beside the part's.
type keyHashesWrite struct {
	lake objstore.Store
	name string
	done chan error // nil once waited for
}

// writeKeyHashes starts writing hashes as the object name.
func (s *stager) writeKeyHashes(ctx context.Context, name string, hashes []byte) *keyHashesWrite {
	h := &keyHashesWrite{lake: s.p.Lake, name: name, done: make(chan error, 1)}
	go func() {
		_, err := h.lake.Write(ctx, name, bytes.NewReader(hashes), objstore.WriteOptions{ContentType: "application/octet-stream"})
		h.done <- err
	}()
	return h
}

// wait waits for the key hashes (none: nil); after a failure of the part,
// with drop, it removes them: the part is not staged.
func (h *keyHashesWrite) wait(ctx context.Context, drop bool) error {
	if h == nil || h.done == nil {
		return nil
	}
	err := <-h.done
	h.done = nil
	if err == nil && drop {
		_ = h.lake.Delete(context.WithoutCancel(ctx), h.name)
	}
	return err
}

// codeList holds range codes side by side in one buffer: a part holds up
// to batch_max_events rows.
type codeList struct {
	buf []byte  // the codes, one after the other
	at  []int32 // code i is buf[at[i]:at[i+1]]
}

// mark ends the code appended to buf since the one before.
func (l *codeList) mark() {
	if len(l.at) == 0 {
		l.at = append(l.at, 0)
	}
	l.at = append(l.at, int32(len(l.buf)))
}

func (l *codeList) code(i int32) []byte { return l.buf[l.at[i]:l.at[i+1]] }

// keyCodes are the range codes of a part's rows.
type keyCodes struct {
	codeList
	idx  []int // key columns in the history row
	key  []any
	rows int // how many codes the part will hold
}

// add appends the range code of the key of a history row whose first off
// columns are left out of row. A null key column is a bad record: no merge
// could apply it.
func (k *keyCodes) add(row []any, off int, hs value.StructType) error {
	k.key = k.key[:0]
	for _, i := range k.idx {
		if row[i-off] == nil {
			return fmt.Errorf("primary key column %q is null", hs.Fields[i].Name)
		}
		k.key = append(k.key, row[i-off])
	}
	var err error
	if k.buf, err = cdc.AppendRangeCode(k.buf, k.key); err != nil {
		return err
	}
	if len(k.at) == 1 && k.rows > 1 {
		// The codes of a part's keys are mostly of one length: room for
		// all of them at the first one's, and an eighth more. Grown by
		// append, the buffer of a large part took five times its size
		// in copies (append grows a large slice by a quarter).
		k.buf = slices.Grow(k.buf, len(k.buf)*(k.rows-1)*9/8)
	}
	k.mark()
	return nil
}

// sorted returns the order to write n rows in: by key code, a key's rows
// in the order they came, or as they came when the part has no key. The
// codes' first eight bytes, as an integer, decide most comparisons.
func (k *keyCodes) sorted(n int) []int32 {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	if k == nil {
		return order
	}
	type entry struct {
		prefix uint64
		i      int32
	}
	ents := make([]entry, n)
	for i := range ents {
		var p [8]byte
		copy(p[:], k.code(int32(i)))
		ents[i] = entry{binary.BigEndian.Uint64(p[:]), int32(i)}
	}
	slices.SortFunc(ents, func(a, b entry) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		if c := bytes.Compare(k.code(a.i), k.code(b.i)); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	for j, e := range ents {
		order[j] = e.i
	}
	return order
}

// discard deletes the parts already staged of a file that is not
// registered after all (quarantined, or a failure to retry).
func (s *stager) discard(ctx context.Context) {
	if s.m == nil {
		return
	}
	for _, part := range s.m.Parts {
		for _, name := range part.objectNames() {
			err := s.p.Lake.Delete(context.WithoutCancel(ctx), name)
			if err != nil && !errors.Is(err, objstore.ErrNotExist) {
				s.p.log().Warn("could not delete a staged part of an unstaged file", "file", s.f.Name, "part", name, "error", err)
			}
		}
	}
}

// sourceSchema is the table's current source schema (the current-state
// table's columns without the metadata columns), which types the JSON files
// staged for it; it is empty while the table does not exist.
//
// The schema as last read is kept (p.schemas), so that the next file of
// the table reads only the commits since, not the whole log: reading the
// 10M-row table's snapshot for each file staged was 4.5% of the CPU of
// the bench's sustained loop.
func (p *Pipeline) sourceSchema(ctx context.Context, tableID string) (value.StructType, error) {
	tabs, err := p.TableSet(tableID)
	if err != nil {
		return value.StructType{}, permanentError{fmt.Errorf("table %s: %w", tableID, err)}
	}
	known, _ := p.schemas.get(tableID)
	at, err := delta.Open(tabs.State).MetadataSince(ctx, known.at)
	if errors.Is(err, delta.ErrNotATable) {
		return value.StructType{}, nil
	}
	if err != nil {
		return value.StructType{}, fmt.Errorf("read the schema of table %s: %w", tableID, err)
	}
	if at.Metadata != known.at.Metadata {
		full, err := value.ParseSchema(at.Metadata.SchemaString)
		if err != nil {
			return value.StructType{}, fmt.Errorf("read the schema of table %s version %d: %w", tableID, at.Version, err)
		}
		known.source = cdc.SourceSchema(full)
	}
	known.at = at
	p.schemas.put(tableID, known)
	return known.source, nil
}

// knownSchema is a table's metaData as staging last read it, and its
// source schema. Files of one table staged side by side may put an older
// read after a newer one: the next read then starts from the older one,
// which costs a few more commits read, nothing more.
type knownSchema struct {
	at     delta.MetadataAt
	source value.StructType
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
	if len(m.Parts) == 0 && m.Add.Path != "" { // staged before parts
		m.Parts = []stagedPart{{Schema: m.Schema, Add: m.Add, Events: m.Events, Untyped: m.Untyped, MaxOrder: m.MaxOrder}}
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
