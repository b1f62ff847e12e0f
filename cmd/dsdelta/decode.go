package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// cmdDecode implements `dsdelta decode FILE`: it decodes one Datastream file
// (local path or gs:// URL; Avro, JSON lines plain or gzip, or a JSON array)
// and prints one JSON object per event:
//
//	{"table":"db.t","op":"upsert","key":{"id":1},"order":"mysql-bin.000014:2097",
//	 "source_timestamp":"2024-05-09T06:56:54.000000Z","read_method":"cdc",
//	 "change_type":"INSERT","row":{...}}
//
// key is null for a table without a primary key (history only). Values use
// the canonical encoding of `dsdelta show` (value.AppendJSON). JSON events
// are typed as the pipeline stages them: the whole file is read, then
// datastream.UnifyJSON decides each column's type from all its values, so
// every event of a file prints with the same types (Avro events print as
// decoded). Events decoded before a bad record are printed; the error names
// the file, record, field and reason.
func cmdDecode(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("decode", stderr)
	format := fs.String("format", "jsonl", "output format: jsonl")
	input := fs.String("input", "auto", "input format: auto, jsonl or avro")
	schemaFile := fs.String("avro-schema", "", "Avro schema file typing JSON payloads (Datastream's schema file)")
	source := fs.String("source", "", "source kind when read_method does not say: mysql, oracle, postgresql, sqlserver")
	var pks multiFlag
	fs.Var(&pks, "pk", "primary key override DB.TABLE=COL[,COL...] (repeatable; empty list = history only)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dsdelta decode [flags] FILE")
		fs.PrintDefaults()
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return fmt.Errorf("%w: want exactly one FILE, got %d", errUsage, len(pos))
	}
	if *format != "jsonl" {
		return fmt.Errorf("%w: unsupported --format %q (want jsonl)", errUsage, *format)
	}
	opts := datastream.Options{Source: datastream.Source(*source)}
	switch *input {
	case "auto":
	case "jsonl", "json":
		opts.Format = datastream.FormatJSONL
	case "avro":
		opts.Format = datastream.FormatAvro
	default:
		return fmt.Errorf("%w: unsupported --input %q (want auto, jsonl or avro)", errUsage, *input)
	}
	switch opts.Source {
	case datastream.Unknown, datastream.MySQL, datastream.Oracle, datastream.PostgreSQL, datastream.SQLServer:
	default:
		return fmt.Errorf("%w: unknown --source %q", errUsage, *source)
	}
	if len(pks) > 0 {
		opts.PrimaryKeys = map[string][]string{}
		for _, p := range pks {
			tbl, cols, ok := strings.Cut(p, "=")
			if _, err := datastream.ParseTableID(tbl); !ok || err != nil {
				return fmt.Errorf("%w: --pk %q: want DB.TABLE=COL[,COL...]", errUsage, p)
			}
			var list []string
			for _, c := range strings.Split(cols, ",") {
				if c = strings.TrimSpace(c); c != "" {
					list = append(list, c)
				}
			}
			opts.PrimaryKeys[tbl] = list
		}
	}
	if *schemaFile != "" {
		b, err := os.ReadFile(*schemaFile)
		if err != nil {
			return fmt.Errorf("read Avro schema: %w", err)
		}
		opts.AvroSchema = b
	}

	path := pos[0]
	rc, file, err := openSource(ctx, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	opts.File = file

	// A JSON column's type depends on every value of the file, so the
	// events are held until the end, as the pipeline's stage does.
	var events datastream.Events
	derr := datastream.All(ctx, rc, path, opts, func(ev datastream.Event) error {
		events.Append(ev)
		return nil
	})
	if _, err := events.UnifyJSON(value.StructType{}); err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	var line []byte
	for _, ev := range events.All() {
		line, err = ev.AppendJSON(line[:0])
		if err != nil {
			return fmt.Errorf("encode record %d of %s: %w", ev.Meta.Record, path, err)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil && derr == nil {
		derr = err
	}
	return derr
}

// openSource opens a local file or an object URL (gs://, file://, mem://).
func openSource(ctx context.Context, path string) (io.ReadCloser, datastream.SourceFile, error) {
	if !strings.Contains(path, "://") {
		f, err := os.Open(path)
		if err != nil {
			return nil, datastream.SourceFile{}, fmt.Errorf("open %s: %w", path, err)
		}
		return f, datastream.SourceFile{Name: path, Size: -1}, nil
	}
	dir, name := objstore.Split(path)
	if name == "" {
		return nil, datastream.SourceFile{}, fmt.Errorf("%w: %s names no object", errUsage, path)
	}
	store, err := objstore.Open(ctx, dir)
	if err != nil {
		return nil, datastream.SourceFile{}, err
	}
	closeStore := func() { _ = store.Close() }
	file := datastream.SourceFile{Name: path, Size: -1}
	if bucket, rest, ok := strings.Cut(strings.TrimPrefix(path, "gs://"), "/"); ok && strings.HasPrefix(path, "gs://") {
		file.Bucket, file.Name = bucket, rest
	}
	if info, err := store.Stat(ctx, name); err == nil {
		file.Generation, file.Size = info.Generation, info.Size
	} else {
		closeStore()
		return nil, datastream.SourceFile{}, fmt.Errorf("stat %s: %w", path, err)
	}
	r, err := store.NewReader(ctx, name, 0, -1)
	if err != nil {
		closeStore()
		return nil, datastream.SourceFile{}, fmt.Errorf("open %s: %w", path, err)
	}
	return readCloser{Reader: r, close: func() error {
		err := r.Close()
		closeStore()
		return err
	}}, file, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
