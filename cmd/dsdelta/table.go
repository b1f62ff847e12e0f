package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/pipeline"
	"github.com/dsdelta/dsdelta/shared/value"
)

// openTable opens the Delta table at a local path or gs:// URL, and the
// store it is in, which the caller closes. A local path that does not exist
// is an error (objstore.Open would create it).
func openTable(ctx context.Context, url string) (*delta.Table, objstore.Store, error) {
	store, err := openStore(ctx, url, "table", true)
	if err != nil {
		return nil, nil, err
	}
	return delta.Open(store), store, nil
}

func tableArg(fs *flag.FlagSet, pos []string, name string) (string, error) {
	if len(pos) != 1 {
		fs.Usage()
		return "", fmt.Errorf("%w: %s takes exactly one TABLE (a folder or gs://bucket/path)", errUsage, name)
	}
	return pos[0], nil
}

// describeOutput is what describe --json prints: the table as named, and
// its description.
type describeOutput struct {
	Table string `json:"table"`
	pipeline.TableDescription
}

func cmdDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("describe", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "describe")
	if err != nil {
		return err
	}
	tab, store, err := openTable(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	snap, err := tab.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	d, err := pipeline.Describe(ctx, snap)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if d.NumRecords == nil {
		fmt.Fprintf(stderr, "dsdelta describe: warning: %s: %d of %d data files have no record count in their stats and cannot be read; the record count is unknown\n",
			url, len(d.UncountedFiles), d.NumFiles)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(describeOutput{Table: url, TableDescription: d})
	}
	return printDescription(stdout, url, d, snap.Schema())
}

// printDescription prints a table's description as text.
func printDescription(stdout io.Writer, url string, d pipeline.TableDescription, schema value.StructType) error {
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "table\t%s\n", url)
	fmt.Fprintf(tw, "version\t%d (%s)\n", d.Version, d.Timestamp)
	fmt.Fprintf(tw, "id\t%s\n", d.ID)
	if d.Name != "" {
		fmt.Fprintf(tw, "name\t%s\n", d.Name)
	}
	pr := d.Protocol
	fmt.Fprintf(tw, "protocol\treader %d, writer %d", pr.MinReaderVersion, pr.MinWriterVersion)
	if len(pr.ReaderFeatures)+len(pr.WriterFeatures) > 0 {
		fmt.Fprintf(tw, " (reader features %v, writer features %v)", pr.ReaderFeatures, pr.WriterFeatures)
	}
	fmt.Fprintln(tw)
	if len(d.ReaderRequirements) > 0 {
		names := make([]string, len(d.ReaderRequirements))
		for i, r := range d.ReaderRequirements {
			names[i] = r.Feature
		}
		fmt.Fprintf(tw, "reader features\t%s\n", strings.Join(names, ", "))
		for _, r := range d.ReaderRequirements {
			fmt.Fprintf(tw, "\t%s\n", r.Note)
		}
	}
	fmt.Fprintf(tw, "partition columns\t%s\n", strings.Join(d.PartitionColumns, ", "))
	fmt.Fprintf(tw, "files\t%d\n", d.NumFiles)
	if d.NumRecords != nil {
		fmt.Fprintf(tw, "records\t%d\n", *d.NumRecords)
	} else {
		fmt.Fprintf(tw, "records\tunknown (%d counted; %d of %d files have no numRecords in their stats and cannot be read)\n",
			d.RecordsCounted, len(d.UncountedFiles), d.NumFiles)
	}
	fmt.Fprintf(tw, "size\t%d bytes\n", d.SizeBytes)
	if dv := d.DeletionVectors; dv.Files > 0 {
		fmt.Fprintf(tw, "deletion vectors\ton %d of %d files, deleting %d rows that are still stored (compaction purges them)\n", dv.Files, d.NumFiles, dv.DeletedRows)
	}
	for _, f := range d.UncountedFiles {
		// A missing file needs no reason; an unreadable one does.
		fmt.Fprintf(tw, "%s file\t%s (%d bytes in the log)", f.Problem, f.Path, f.SizeBytes)
		if f.Problem != "missing" {
			fmt.Fprintf(tw, ": %s", f.Error)
		}
		fmt.Fprintln(tw)
	}
	if d.LastCheckpoint != nil {
		fmt.Fprintf(tw, "last checkpoint\t%d\n", *d.LastCheckpoint)
	} else {
		fmt.Fprintf(tw, "last checkpoint\tnone\n")
	}
	keys := make([]string, 0, len(d.Configuration))
	for k := range d.Configuration {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "property\t%s = %s\n", k, d.Configuration[k])
	}
	fmt.Fprintln(tw, "schema")
	for _, f := range schema.Fields {
		null := ""
		if !f.Nullable {
			null = " not null"
		}
		fmt.Fprintf(tw, "  %s\t%s%s\n", f.Name, f.Type, null)
	}
	return tw.Flush()
}

type historyOutput struct {
	Version        int64             `json:"version"`
	Timestamp      string            `json:"timestamp"`
	Operation      string            `json:"operation"`
	Parameters     map[string]string `json:"operation_parameters"`
	Metrics        map[string]string `json:"operation_metrics"`
	ReadVersion    *int64            `json:"read_version,omitempty"`
	IsolationLevel string            `json:"isolation_level,omitempty"`
	IsBlindAppend  *bool             `json:"is_blind_append,omitempty"`
	EngineInfo     string            `json:"engine_info,omitempty"`
}

func cmdHistory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("history", stderr)
	asJSON := fs.Bool("json", false, "print JSON lines, newest first")
	limit := fs.Int("limit", 0, "at most this many versions (0: all retained)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "history")
	if err != nil {
		return err
	}
	tab, store, err := openTable(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	entries, err := tab.History(ctx, *limit)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, e := range entries {
			if err := enc.Encode(historyOutput{Version: e.Version, Timestamp: e.Timestamp.UTC().Format(time.RFC3339Nano), Operation: e.Operation,
				Parameters: orEmptyMap(e.Parameters), Metrics: orEmptyMap(e.Metrics), ReadVersion: e.ReadVersion,
				IsolationLevel: e.IsolationLevel, IsBlindAppend: e.IsBlindAppend, EngineInfo: e.EngineInfo}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "version\ttimestamp\toperation\tparameters\tmetrics")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Version, e.Timestamp.UTC().Format(time.RFC3339), e.Operation, kv(e.Parameters), kv(e.Metrics))
	}
	return tw.Flush()
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func kv(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, " ")
}

func cmdShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show", stderr)
	version := fs.Int64("version", -1, "show the table as of this version")
	timestamp := fs.String("timestamp", "", "show the table as of this time (RFC 3339 or YYYY-MM-DD[ HH:MM:SS])")
	format := fs.String("format", "table", "output format: table or jsonl")
	limit := fs.Int("limit", 0, "at most this many rows (0: all)")
	skipMissing := fs.Bool("skip-missing", false, "leave out the data files that are missing or cannot be read, show the rows of the others, and name the files left out on stderr (jsonl: rows a file gave before it failed are printed already)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	url, err := tableArg(fs, pos, "show")
	if err != nil {
		return err
	}
	if *format != "table" && *format != "jsonl" {
		return fmt.Errorf("%w: --format must be table or jsonl", errUsage)
	}
	if *version >= 0 && *timestamp != "" {
		return fmt.Errorf("%w: give --version or --timestamp, not both", errUsage)
	}
	tab, store, err := openTable(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	var snap *delta.Snapshot
	switch {
	case *version >= 0:
		snap, err = tab.SnapshotAt(ctx, *version)
	case *timestamp != "":
		ts, perr := parseTime(*timestamp)
		if perr != nil {
			return fmt.Errorf("%w: --timestamp: %v", errUsage, perr)
		}
		snap, err = tab.SnapshotAsOf(ctx, ts)
	default:
		snap, err = tab.Snapshot(ctx)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	schema := snap.Schema()
	scan := &showScan{snap: snap, limit: *limit, skip: *skipMissing}
	var rows [][]any
	if *format == "jsonl" {
		var buf []byte
		scan.emit = func(row []any) error {
			var err error
			if buf, err = value.AppendRowJSON(buf[:0], schema, row); err != nil {
				return err
			}
			buf = append(buf, '\n')
			_, err = stdout.Write(buf)
			return err
		}
		scan.drop = func(int) bool { return false }
	} else {
		scan.emit = func(row []any) error {
			rows = append(rows, row)
			return nil
		}
		scan.drop = func(n int) bool {
			rows = rows[:len(rows)-n]
			return true
		}
	}
	if err := scan.run(ctx); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	scan.warn(stderr, url)
	if *format == "jsonl" {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	names := make([]string, len(schema.Fields))
	for i, f := range schema.Fields {
		names[i] = f.Name
	}
	fmt.Fprintln(tw, strings.Join(names, "\t"))
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = cell(schema.Fields[i].Type, v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := len(scan.skipped); n > 0 {
		fmt.Fprintf(stdout, "(%d rows, version %d, %d of %d data files skipped)\n", len(rows), snap.Version(), n, snap.NumFiles())
	} else {
		fmt.Fprintf(stdout, "(%d rows, version %d)\n", len(rows), snap.Version())
	}
	return nil
}

// showScan hands show the rows of a snapshot, file by file in path order.
type showScan struct {
	snap  *delta.Snapshot
	limit int // rows at most (0: all)
	// skip leaves out a data file that is missing or cannot be read, so
	// that an operator sees the rest of a damaged table, instead of
	// failing on it.
	skip bool
	emit func(row []any) error
	// drop takes back the last n rows emitted, when they are not printed
	// yet; rows already printed (jsonl streams them) cannot be.
	drop    func(n int) bool
	rows    int // rows emitted and not taken back
	skipped []skippedFile
}

// skippedFile is a data file show left out, and why.
type skippedFile struct {
	add delta.Add
	err error
	// printed counts its rows printed before a read failed part-way
	// through it.
	printed int
}

func (s *showScan) run(ctx context.Context) error {
	errLimit := errors.New("limit reached")
	for _, f := range s.snap.Files() {
		var fileRows int
		var emitErr error
		err := delta.ReadFile(ctx, s.snap.Store(), s.snap.Metadata(), f, delta.ReadOptions{}, func(row []any) error {
			if s.limit > 0 && s.rows >= s.limit {
				return errLimit
			}
			if emitErr = s.emit(row); emitErr != nil {
				return emitErr
			}
			s.rows++
			fileRows++
			return nil
		})
		switch {
		case err == nil:
		case errors.Is(err, errLimit):
			return nil
		case emitErr != nil || ctx.Err() != nil:
			// Show's own output failed, or it was stopped: no file is
			// to blame.
			return err
		case !s.skip:
			return fmt.Errorf("version %d: %w (--skip-missing shows the rows of the other files)", s.snap.Version(), err)
		default:
			sk := skippedFile{add: f, err: err, printed: fileRows}
			if s.drop(fileRows) {
				s.rows -= fileRows
				sk.printed = 0
			}
			s.skipped = append(s.skipped, sk)
		}
	}
	return nil
}

// warn names on stderr the files the scan left out, as describe warns of
// the files it cannot count: stdout holds only rows (and, for the table
// format, its closing line).
func (s *showScan) warn(stderr io.Writer, url string) {
	if len(s.skipped) == 0 {
		return
	}
	fmt.Fprintf(stderr, "dsdelta show: warning: %s: %d of %d data files of version %d skipped (--skip-missing); their rows are not shown\n",
		url, len(s.skipped), s.snap.NumFiles(), s.snap.Version())
	for _, sk := range s.skipped {
		problem := pipeline.FileProblem(sk.err)
		fmt.Fprintf(stderr, "dsdelta show: warning: skipped %s data file %s (%d bytes in the log)", problem, sk.add.Path, sk.add.Size)
		if problem != "missing" {
			fmt.Fprintf(stderr, ": %v", sk.err)
		}
		if sk.printed > 0 {
			fmt.Fprintf(stderr, "; its first %d rows were printed before the error", sk.printed)
		}
		fmt.Fprintln(stderr)
	}
}

// cell renders a value for the table format: the JSON encoding without the
// quotes of plain strings.
func cell(t value.Type, v any) string {
	if v == nil {
		return "NULL"
	}
	b, err := value.AppendJSON(nil, t, v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		var u string
		if json.Unmarshal(b, &u) == nil {
			s = u
		}
	}
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}

func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot parse %q as a time", s)
}
