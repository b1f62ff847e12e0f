package pipeline

import (
	"context"
	"fmt"
	"sort"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// ReplayOptions says which files Replay stages again, and where they are.
type ReplayOptions struct {
	// Source is the Datastream output the files are named relative to (a
	// folder, or a prefix of Bucket).
	Source objstore.Store
	// Bucket and Prefix locate Source in a deployment ("" for an embedded
	// run, whose files are named relative to the source folder): a file
	// is registered as Prefix/name in Bucket.
	Bucket, Prefix string
	// Files are the names, relative to Source, to stage again; when empty,
	// All stages every data file under Source, and otherwise every
	// quarantined file in the registry is staged again.
	Files []string
	All   bool
}

// ReplayResult is what Replay did.
type ReplayResult struct {
	Staged  int // files staged (and their tables merged)
	Skipped int // files already staged, or not to be staged
	// StillBad are the files quarantined again, in the order staged.
	StillBad []StageResult
	// Merged are the tables merged, by id; Busy those whose lease another
	// process held: their replayed files are staged, pending its merge.
	Merged, Busy []string
	// Pending counts the staged files of the Busy tables.
	Pending int
}

// Replay stages files again after a fix (the quarantined ones, named ones,
// or every one) and merges the tables they belong to. It stops at the first
// error, returning what it did until then.
func (p *Pipeline) Replay(ctx context.Context, o ReplayOptions) (ReplayResult, error) {
	var res ReplayResult
	files, err := p.replayFiles(ctx, o)
	if err != nil {
		return res, err
	}
	if o.Bucket == "" {
		// Embedded runs name files relative to the source folder.
		for i := range files {
			files[i].Bucket = ""
		}
	}
	touched := map[string]int{}
	for _, f := range files {
		sr, err := p.Stage(ctx, f)
		if err != nil {
			return res, err
		}
		switch {
		case sr.Quarantined != "":
			res.StillBad = append(res.StillBad, sr)
		case sr.Skipped != "" || sr.Duplicate:
			res.Skipped++
		default:
			res.Staged++
			touched[sr.Table]++
		}
	}
	ids := make([]string, 0, len(touched))
	for id := range touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		mr, err := p.MergeTable(ctx, id)
		if err != nil {
			return res, err
		}
		if mr.Busy {
			res.Busy = append(res.Busy, id)
			res.Pending += touched[id]
			continue
		}
		res.Merged = append(res.Merged, id)
	}
	return res, nil
}

// replayFiles lists the files to stage again: named ones, every one, or the
// quarantined.
func (p *Pipeline) replayFiles(ctx context.Context, o ReplayOptions) ([]datastream.SourceFile, error) {
	full := func(name string) string {
		if o.Prefix != "" {
			return o.Prefix + "/" + name
		}
		return name
	}
	var files []datastream.SourceFile
	switch {
	case len(o.Files) > 0:
		for _, name := range o.Files {
			info, err := o.Source.Stat(ctx, name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			files = append(files, datastream.SourceFile{Bucket: o.Bucket, Name: full(info.Name), Generation: info.Generation, Size: info.Size})
		}
	case o.All:
		err := o.Source.List(ctx, "", "", func(info objstore.Info) error {
			if p.Config.IsDataFile(info.Name) {
				files = append(files, datastream.SourceFile{Bucket: o.Bucket, Name: full(info.Name), Generation: info.Generation, Size: info.Size})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	default:
		tables, err := p.Status.Statuses(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range tables {
			if t.Quarantined == 0 {
				continue
			}
			q, err := p.Registry.ListFiles(ctx, t.Table, coord.StateQuarantined)
			if err != nil {
				return nil, err
			}
			for _, f := range q {
				// Size counts staged bytes once a file was staged;
				// SourceBytes is the source object's own size.
				size := f.Size
				if f.SourceBytes > 0 {
					size = f.SourceBytes
				}
				files = append(files, datastream.SourceFile{Bucket: f.Bucket, Name: f.Name, Generation: f.Generation, Size: size})
			}
		}
	}
	return files, nil
}
