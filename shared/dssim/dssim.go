package dssim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Source is a source database engine.
type Source string

// Supported sources.
const (
	MySQL      Source = "mysql"
	Oracle     Source = "oracle"
	PostgreSQL Source = "postgresql"
)

// Format is an output file format.
type Format string

// Output formats.
const (
	JSONL   Format = "jsonl"
	JSONLGz Format = "jsonl.gz"
	Avro    Format = "avro"
)

// TableSpec describes one simulated source table.
type TableSpec struct {
	Source   Source
	Database string // MySQL database, or Oracle/PostgreSQL schema
	Table    string
	Format   Format
	// InitialRows exist before the stream starts; they reach the output
	// through the backfill.
	InitialRows int
	// Changes is the number of CDC operations after the stream starts.
	Changes int
}

// ID is the table id dsdelta derives from source_metadata.
func (t TableSpec) ID() string { return t.Database + "." + t.Table }

// Object is Datastream's object (folder) name.
func (t TableSpec) Object() string { return t.Database + "_" + t.Table }

// Options control a simulation.
type Options struct {
	Seed   uint64
	Tables []TableSpec
	// Prefix is the stream's path prefix in the bucket ("" allowed).
	Prefix string
	// EventsPerFile caps the events in one file (default 50).
	EventsPerFile int
	// DuplicateEvents is the fraction of events also written into a second
	// file, as Datastream does where backfill and CDC overlap (default 0).
	DuplicateEvents float64
	// RedeliveredFiles is the fraction of files delivered twice (default 0).
	RedeliveredFiles float64
	// Shuffle delivers files in random order rather than time order.
	Shuffle bool
	// Start is the stream start time (default 2026-01-05T10:00:00Z): the
	// same options write the same files.
	Start time.Time
	// End, when set, dates the stream instead so that its newest event is
	// read at End, or less than a second before: given the time now, a
	// demo's lag reads true. The dates then move with End; everything
	// else is as Start would have it.
	End time.Time
}

// File is one Datastream output object.
type File struct {
	Name   string // object name below the bucket
	Data   []byte
	Table  string // table id
	Events int
}

// Result is a simulation's output.
type Result struct {
	Files  []File
	Tables map[string]*Table // by table id
}

// Table is the reference state of one source table after all changes.
type Table struct {
	Spec   TableSpec
	Schema value.StructType
	Key    []string
	// Rows maps KeyString(key values) to the row (one value per Schema field).
	Rows map[string][]any
	// Events counts the distinct change events emitted (duplicates excluded).
	Events int
	// Deletes counts delete events (including the old half of key changes).
	Deletes int
}

// KeyString renders key values as the map key used by Table.Rows.
func KeyString(key []any) string {
	var b strings.Builder
	for i, k := range key {
		if i > 0 {
			b.WriteByte('|')
		}
		enc, err := value.AppendJSON(nil, nil, k)
		if err != nil {
			fmt.Fprint(&b, k)
			continue
		}
		b.Write(enc)
	}
	return b.String()
}

// event is one rendered change.
type event struct {
	table      *tableSim
	readMethod string
	changeType string // "" for a backfill row with a null change_type
	isDeleted  bool
	sourceTS   time.Time
	readTS     time.Time
	pos        position
	row        []any
	seq        int // emission order, for stable file grouping
}

// position is a source log position; backfill rows have a zero position.
type position struct {
	binlogFile string // mysql
	binlogPos  int64
	scn        int64 // oracle
	rsID       string
	ssn        int64
	lsn        string // postgresql
	txID       int64
}

// Run simulates the configured tables.
func Run(opts Options) (*Result, error) {
	if opts.EventsPerFile <= 0 {
		opts.EventsPerFile = 50
	}
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	res := &Result{Tables: map[string]*Table{}}
	// Every table plays before any renders: End dates them all by the
	// newest event of any.
	sims := make([]*tableSim, len(opts.Tables))
	played := make([][]event, len(opts.Tables))
	seen := map[string]bool{}
	for i, spec := range opts.Tables {
		if spec.Format == "" {
			spec.Format = JSONL
		}
		if seen[spec.ID()] {
			return nil, fmt.Errorf("simulate: table %s listed twice", spec.ID())
		}
		seen[spec.ID()] = true
		ts, err := newTableSim(spec, rand.New(rand.NewPCG(opts.Seed+uint64(i)*7919, uint64(i))), opts.Start)
		if err != nil {
			return nil, err
		}
		sims[i], played[i] = ts, ts.play()
	}
	if !opts.End.IsZero() {
		redate(sims, played, opts.End)
	}
	var files []File
	for i, ts := range sims {
		tf, err := ts.render(played[i], opts, rng)
		if err != nil {
			return nil, fmt.Errorf("simulate %s: %w", ts.spec.ID(), err)
		}
		files = append(files, tf...)
		res.Tables[ts.spec.ID()] = ts.reference(len(played[i]))
	}
	if opts.Shuffle {
		rng.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	} else {
		sort.SliceStable(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	}
	res.Files = files
	return res, nil
}

// redate moves the events of every table by one whole number of seconds,
// so that the newest is read at end or less than a second before. Whole
// seconds keep MySQL's and Oracle's source timestamps whole, and one move
// for all tables keeps them in step with each other.
func redate(sims []*tableSim, played [][]event, end time.Time) {
	var newest time.Time
	for _, events := range played {
		for _, e := range events {
			if e.readTS.After(newest) {
				newest = e.readTS
			}
		}
	}
	if newest.IsZero() {
		return
	}
	shift := end.Sub(newest)
	if r := shift % time.Second; r != 0 {
		shift -= r
		if r < 0 {
			shift -= time.Second
		}
	}
	for i, ts := range sims {
		ts.start, ts.clock = ts.start.Add(shift), ts.clock.Add(shift)
		for j := range played[i] {
			e := &played[i][j]
			e.sourceTS, e.readTS = e.sourceTS.Add(shift), e.readTS.Add(shift)
		}
	}
}
